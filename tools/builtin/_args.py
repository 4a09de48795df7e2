"""Argument checks and output helpers shared by the built-in tools.

The runtime has already validated arguments against the tool's JSON Schema, but the seeded schemas
are loose (``"updates": {"type": "object"}``) and a value the database rejects (too long, bad
UUID) would abort the executor's transaction. So handlers re-check what they use here and turn
every problem into a :class:`ToolError` the model can act on.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import uuid
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db.models import Q

from core.events import event_emit
from core.models import ActorType, Event, Membership
from tools.handlers import ToolContext, ToolError

INVALID = "invalid_argument"
OUTPUT_TEXT_CHARS = 500  # long texts in outputs are cut: the model's context is the budget


def text(args: Mapping[str, Any], name: str, *, max_length: int, required: bool = False) -> str:
    value = args.get(name)
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise ToolError(INVALID, f"'{name}' must be a string.", field=name)
    value = value.strip()
    if "\x00" in value:  # PostgreSQL text cannot hold NUL: the query would fail, not the call
        raise ToolError(INVALID, f"'{name}' must not contain NUL characters.", field=name)
    if required and not value:
        raise ToolError(INVALID, f"'{name}' must not be empty.", field=name)
    if len(value) > max_length:
        raise ToolError(
            INVALID,
            f"'{name}' is {len(value)} characters long; the maximum is {max_length}.",
            field=name,
        )
    return value


def choice(value: object, name: str, allowed: list[str]) -> str:
    if value not in allowed:
        raise ToolError(INVALID, f"'{name}' must be one of: {', '.join(allowed)}.", field=name)
    return str(value)


def parse_uuid(value: object, name: str) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise ToolError(INVALID, f"'{name}' must be a UUID, got {str(value)[:80]!r}.") from None


# What a stored date-time may be (UTC, end exclusive). PostgreSQL keeps far wider ones, but
# Python's datetime cannot read back past year 9999 (nor before year 1 once an offset applies), so
# one such row makes every later read of its table fail; no real date of this platform's business
# is outside these years.
EARLIEST = datetime.datetime(1900, 1, 1, tzinfo=datetime.UTC)
LATEST = datetime.datetime(2201, 1, 1, tzinfo=datetime.UTC)


def parse_datetime(value: object, name: str, *, date_only_ok: bool = False) -> datetime.datetime:
    """An aware datetime from ISO 8601. A date alone means midnight UTC when ``date_only_ok``."""
    return parse_moment(value, name, date_only_ok=date_only_ok)[0]


def parse_moment(
    value: object, name: str, *, date_only_ok: bool = False
) -> tuple[datetime.datetime, bool]:
    """(aware datetime, whether ``value`` was a date alone) from ISO 8601, within 1900-2200 UTC.

    A date alone is midnight UTC, the start of that day; callers that mean the whole day (a
    range's end, a filter's equality) use the flag to extend it.
    """
    if not isinstance(value, str):
        raise ToolError(INVALID, f"'{name}' must be an ISO 8601 date-time string.", field=name)
    try:
        parsed = datetime.datetime.fromisoformat(value.strip())
    except ValueError:
        raise ToolError(
            INVALID,
            f"'{name}' is not an ISO 8601 date-time: {value[:80]!r} "
            "(example: 2030-01-31T14:00:00+01:00).",
            field=name,
        ) from None
    date_only = False
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        date_only = date_only_ok and _is_date(value.strip())
        if not date_only:
            raise ToolError(
                INVALID,
                f"'{name}' needs a timezone offset (e.g. 'Z' or '+02:00'): {value[:80]!r}.",
                field=name,
            )
        parsed = parsed.replace(tzinfo=datetime.UTC)
    try:
        in_range = EARLIEST <= parsed.astimezone(datetime.UTC) < LATEST
    except OverflowError:  # e.g. 9999-12-31T22:00-05:00 is in year 10000 in UTC
        in_range = False
    if not in_range:
        raise ToolError(
            INVALID,
            f"'{name}' must be between 1900-01-01T00:00:00Z and 2200-12-31T23:59:59Z "
            f"(in UTC): {value[:80]!r}.",
            field=name,
        )
    return parsed, date_only


def _is_date(value: str) -> bool:
    """Whether ``value`` is a calendar date alone ("2030-01-31"), not a naive date-time."""
    try:
        datetime.date.fromisoformat(value)
    except ValueError:
        return False
    return True


def email_list(value: object, name: str, *, max_items: int, required: bool = True) -> list[str]:
    """Validated, de-duplicated (case-insensitively) e-mail addresses."""
    if value is None:
        value = []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ToolError(INVALID, f"'{name}' must be a list of e-mail addresses.", field=name)
    seen: dict[str, str] = {}
    for item in value:
        address = item.strip()
        try:
            validate_email(address)
        except ValidationError:
            raise ToolError(
                INVALID, f"'{name}' contains an invalid e-mail address: {address[:100]!r}."
            ) from None
        seen.setdefault(address.lower(), address)
    if required and not seen:
        raise ToolError(INVALID, f"'{name}' needs at least one e-mail address.", field=name)
    if len(seen) > max_items:
        raise ToolError(
            INVALID, f"'{name}' has {len(seen)} addresses; the maximum is {max_items}.", field=name
        )
    return list(seen.values())


def string_list(value: object, name: str, *, max_items: int, max_length: int) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ToolError(INVALID, f"'{name}' must be a list of strings.", field=name)
    items = list(dict.fromkeys(item.strip() for item in value if item.strip()))
    if any("\x00" in item for item in items):  # PostgreSQL text cannot hold NUL
        raise ToolError(INVALID, f"'{name}' items must not contain NUL characters.", field=name)
    if len(items) > max_items:
        raise ToolError(INVALID, f"'{name}' has more than {max_items} items.", field=name)
    too_long = [item for item in items if len(item) > max_length]
    if too_long:
        raise ToolError(
            INVALID,
            f"'{name}' items must be at most {max_length} characters: {too_long[0][:60]!r}...",
            field=name,
        )
    return items


def member_user(ctx: ToolContext, ref: object, name: str) -> tuple[int, str]:
    """(id, email) of the active agency member that ``ref`` names by user id, e-mail or username.

    A deactivated user cannot log in to see a task or a notification, so they are not offered.
    """
    if not isinstance(ref, str | int) or isinstance(ref, bool) or not str(ref).strip():
        raise ToolError(INVALID, f"'{name}' must name a user (id, e-mail or username).")
    key = str(ref).strip()
    if key.isdigit():
        match = Q(user_id=int(key))
    elif "@" in key:
        match = Q(user__email__iexact=key)
    else:
        match = Q(user__username=key)
    found = (
        Membership.objects.filter(match, agency_id=ctx.agency_id, user__is_active=True)
        .values_list("user_id", "user__email")
        .first()
    )
    if found is None:
        raise ToolError(
            "not_found", f"No active member of this agency matches {name}={key[:100]!r}."
        )
    return found[0], found[1]


def bounded_int(args: Mapping[str, Any], name: str, *, default: int, high: int) -> int:
    """A positive integer argument; values above ``high`` are capped rather than refused."""
    value = args.get(name, default)
    if value is None:
        value = default
    number = whole_number(value)
    if number is None or number < 1:
        raise ToolError(INVALID, f"'{name}' must be a positive integer.", field=name)
    return min(number, high)


def whole_number(value: object) -> int | None:
    """``value`` as an int if it is a whole number, else None.

    JSON Schema counts 5.0 as an integer (and models write it), so a whole float passes the
    schema and must pass here too; 5.5, NaN, infinities and booleans are not whole numbers.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def emit(
    ctx: ToolContext,
    event_type: str,
    payload: dict[str, Any],
    *,
    module: str,
    entity: str,
    entity_id: object,
    idempotency_key: str = "",
) -> Event:
    """Record an event as this agent's doing (subscribed agents start after commit)."""
    return event_emit(
        agency_id=ctx.agency_id,
        site_id=ctx.site_id,
        event_type=event_type,
        payload={**payload, "source": "ai_agent", "agent_id": str(ctx.agent_id)},
        source_module=module,
        source_entity_type=entity,
        source_entity_id=str(entity_id),
        actor_type=ActorType.AGENT,
        actor_id=str(ctx.agent_id),
        idempotency_key=bounded_key(idempotency_key) if idempotency_key else "",
    )


def bounded_key(key: str, max_length: int = 200) -> str:
    """``key`` itself when it fits the column, else a stable digest of it."""
    if len(key) <= max_length:
        return key
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def truncate(value: str, limit: int = OUTPUT_TEXT_CHARS) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "\u2026"


def iso(value: datetime.datetime | datetime.date | None) -> str | None:
    return None if value is None else value.isoformat()


def jsonable(value: Any, *, text_limit: int = OUTPUT_TEXT_CHARS) -> Any:
    """A JSON-ready copy of a database value: UUIDs and datetimes as strings, long text cut."""
    result: Any
    if value is None or isinstance(value, bool | int):
        result = value
    elif isinstance(value, float | Decimal):
        result = round(float(value), 4)
    elif isinstance(value, datetime.datetime | datetime.date | datetime.time):
        result = value.isoformat()
    elif isinstance(value, list | tuple):
        result = [jsonable(item, text_limit=text_limit) for item in value[:50]]
    elif isinstance(value, dict):
        encoded = json.dumps(value, default=str)
        too_big = len(encoded) > 4 * text_limit
        preview = {"_truncated": True, "preview": truncate(encoded, 4 * text_limit)}
        result = preview if too_big else json.loads(encoded)
    else:  # str, UUID and anything else print as (cut) text
        result = truncate(str(value), text_limit)
    return result
