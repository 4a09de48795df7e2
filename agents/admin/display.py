"""What the agent page computes for staff: the cron schedule in words with its next run, and the
tools an agent may actually call (with the reason for each tool it may not)."""

from __future__ import annotations

import datetime
import uuid
import zoneinfo
from collections.abc import Sequence
from dataclasses import dataclass

from celery.schedules import crontab
from cron_descriptor import FormatError, MissingFieldError, Options, WrongArgumentError
from cron_descriptor import get_description as cron_description
from django.conf import settings
from django.utils import timezone

from agents.models import Agent, AgentVersion
from agents.schedules import InvalidCron, parse_cron
from tools.access import decide_tool
from tools.models import Tool
from tools.patterns import decide
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


@dataclass(frozen=True, slots=True)
class ToolAccess:
    """One active tool of the agency and whether an agent with given patterns is offered it."""

    tool: Tool
    offered: bool
    reason: str  # why it is offered (the allowing pattern) or left out
    pattern: str | None = None  # the allowed pattern that lets an offered tool in


def tool_access_preview(
    agency_id: uuid.UUID, allowed: Sequence[str], denied: Sequence[str]
) -> list[ToolAccess]:
    """Every active tool of the agency, decided as a run decides them (tools.selectors
    ``offered_tools``: a handler installed, name patterns with denied winning, required
    permissions, the agency's modules), with the reason for each, by name."""
    tools = list(active_tools(agency_id).order_by("name"))
    modules = agency_enabled_modules(agency_id)
    offered = {
        tool.pk
        for tool in offered_tools(tools, allowed=allowed, denied=denied, enabled_modules=modules)
    }
    rows = []
    for tool in tools:
        if tool.pk in offered:
            by_name = decide(tool.name, allowed, denied)
            rows.append(ToolAccess(tool, True, by_name.reason, by_name.pattern))
        else:
            access = decide_tool(
                tool.name,
                requires_permissions=tool.requires_permissions,
                requires_modules=tool.requires_modules,
                allowed=allowed,
                denied=denied,
                enabled_modules=modules,
            )
            # Allowed by every rule yet not offered: the one check left is the handler.
            reason = access.message or "No handler for it is installed on this server."
            rows.append(ToolAccess(tool, False, reason))
    return rows


def awaiting_gate(held: AgentVersion, agent: Agent) -> str:
    """What a save or a restore says when a deploy gate holds the version it made."""
    current = agent.current_version.number if agent.current_version else None
    keeps = f" The agent keeps running version {current} until then." if current else ""
    return (
        f"Saved as version {held.number}, awaiting the deploy gate: it becomes current once "
        f"its test cases pass (the agent page shows the progress).{keeps}"
    )
