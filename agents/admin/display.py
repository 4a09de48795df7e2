"""What the agent page computes for staff: the cron schedule in words with its next run, and the
tools an agent may actually call."""

from __future__ import annotations

import datetime
import uuid
import zoneinfo

from celery.schedules import crontab
from cron_descriptor import FormatError, MissingFieldError, Options, WrongArgumentError
from cron_descriptor import get_description as cron_description
from django.conf import settings
from django.utils import timezone

from agents.schedules import InvalidCron, parse_cron
from tools.selectors import active_tools, agency_enabled_modules, offered_tools


def describe_cron(expression: str) -> str:
    """``"0 9 * * 1-5"`` -> ``"At 09:00, Monday through Friday"`` (the expression if it cannot
    be put in words)."""
    options = Options(locale_code="en_US", use_24hour_time_format=True)
    try:
        return cron_description(expression, options)
    except (FormatError, MissingFieldError, WrongArgumentError, ValueError, KeyError):
        return expression


def next_cron_run(expression: str, *, now: datetime.datetime | None = None) -> datetime.datetime:
    """The next time Celery beat starts ``expression``, in the schedule's time zone (the one
    agents.schedules gives the beat entry). Raises :class:`InvalidCron`."""
    tz = zoneinfo.ZoneInfo(settings.TIME_ZONE)
    moment = (now or timezone.now()).astimezone(tz)
    schedule = crontab(**parse_cron(expression), nowfun=lambda: moment)
    start, delta, _ = schedule.remaining_delta(moment, tz=tz)
    return start + delta


def schedule_summary(expression: str, *, active: bool) -> str:
    if not expression:
        return "No schedule: the agent starts only on events, manually or through the API."
    try:
        upcoming = next_cron_run(expression)
    except InvalidCron as exc:
        return str(exc)
    text = f"{describe_cron(expression)}. Next run: {upcoming:%Y-%m-%d %H:%M %Z}"
    return f"{text}." if active else f"{text} (once the agent is active)."


def agent_effective_tools(
    agency_id: uuid.UUID, allowed: list[str], denied: list[str]
) -> tuple[list[str], int]:
    """The tool names the agent may call — decided as a run decides them (a handler installed,
    name patterns, required permissions, the agency's modules) — and how many active tools
    there are."""
    tools = list(active_tools(agency_id))
    offered = offered_tools(
        tools, allowed=allowed, denied=denied, enabled_modules=agency_enabled_modules(agency_id)
    )
    return sorted(tool.name for tool in offered), len(tools)
