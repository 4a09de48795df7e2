"""Which events a subscription may name, and which subscriptions an event goes to.

An entry is an event type (``ai.execution.completed``), a pattern over its leading names
(``ai.*``, ``ai.execution.*``, as agents' trigger events: :func:`core.events.subscriptions_for`)
or ``*`` (every event). The ``ai.*`` types are the platform's own, so an exact ``ai.`` name must
be one of :data:`AI_EVENT_TYPES` (a typo would otherwise subscribe to nothing, silently); other
types are the agency's platform events, named by whoever emits them.
"""

from __future__ import annotations

import re

from core.events import subscriptions_for
from core.models import EVENT_TYPE_REGEX

ALL = "*"
MAX_ENTRIES = 50
# The ai.* events the platform emits (README "Outbound webhooks" lists them).
AI_EVENT_TYPES = (
    "ai.agent.activated",
    "ai.agent.created",
    "ai.agent.deactivated",
    "ai.agent.deleted",
    "ai.agent.updated",
    "ai.approval.expired",
    "ai.approval.requested",
    "ai.approval.resolved",
    "ai.budget.threshold_crossed",
    "ai.execution.completed",
    "ai.execution.failed",
    "ai.execution.loop_detected",
    "ai.execution.started",
    "ai.execution.stuck",
    "ai.question.answered",
    "ai.question.asked",
    "ai.question.expired",
    "ai.version.rolled_back",
    "ai.webhook.disabled",
)
# An entry's form, for the API's schema too: a type, a pattern over leading names, or *.
ENTRY_REGEX = r"^(\*|[a-z][a-z0-9_]*(\.[a-z0-9_]+)*\.([a-z0-9_]+|\*))$"
_TYPE = re.compile(EVENT_TYPE_REGEX)
_PATTERN = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)*\.\*$")


class BadEventTypes(ValueError):
    pass


def clean_event_types(entries: list[str]) -> list[str]:
    """The entries, stripped and deduplicated in their order; :class:`BadEventTypes` names the
    first that is neither a known type, a pattern nor ``*``."""
    cleaned = list(dict.fromkeys(entry.strip() for entry in entries))
    if not cleaned:
        raise BadEventTypes("Name at least one event type or pattern (e.g. ai.execution.failed).")
    if len(cleaned) > MAX_ENTRIES:
        raise BadEventTypes(f"At most {MAX_ENTRIES} event types or patterns.")
    for entry in cleaned:
        if entry == ALL or _PATTERN.match(entry):
            continue
        if not _TYPE.match(entry):
            raise BadEventTypes(
                f"{entry!r} is not an event type (lowercase dotted names like "
                "ai.execution.completed), a pattern like ai.* or ai.execution.*, or *."
            )
        if entry.startswith("ai.") and entry not in AI_EVENT_TYPES:
            raise BadEventTypes(
                f"{entry!r} is not an event the platform emits; its ai.* events are: "
                + ", ".join(AI_EVENT_TYPES)
                + "."
            )
    return cleaned


def matching_entries(event_type: str) -> list[str]:
    """The subscription entries that take an event of ``event_type``."""
    return [*subscriptions_for(event_type), ALL]
