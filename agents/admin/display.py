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
from django.db.models import Q
from django.utils import timezone

from agents.schedules import InvalidCron, parse_cron
from tools import registry
from tools.access import decide_tool
from tools.models import Tool
from tools.selectors import agency_enabled_modules


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
    tools = list(
        Tool.objects.filter(is_active=True)
        .filter(Q(agency_id=agency_id) | Q(agency__isnull=True))
        .values_list("name", "requires_permissions", "requires_modules")
    )
    modules = agency_enabled_modules(agency_id)
    installed = set(registry.registered_names())
    names = [
        name
        for name, permissions, required_modules in tools
        if name in installed
        and decide_tool(
            name,
            requires_permissions=permissions,
            requires_modules=required_modules,
            allowed=allowed,
            denied=denied,
            enabled_modules=modules,
        ).allowed
    ]
    return sorted(names), len(tools)
