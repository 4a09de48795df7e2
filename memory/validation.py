"""Checks of a memory's fields, shared by the store (memory.services), the API and the admin:
a bad value is an ``ApplicationError("invalid")`` naming the field (a 400 in the API, a form
error in the admin), and nothing is written."""

from __future__ import annotations

import datetime
import json
import uuid
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from django.utils import timezone

from core.exceptions import ApplicationError
from memory.models import MemoryType

DEFAULT_CONFIDENCE = Decimal("0.80")
CONTENT_MAX_CHARS = 4000
SUBJECT_TYPE_MAX_CHARS = 50
SOURCE_MAX_CHARS = 100
MAX_TAGS = 20
TAG_MAX_CHARS = 100
METADATA_MAX_BYTES = 16_000

# What memory_update may change; the rest is the store's (embedding, access) or fixed (agent).
UPDATABLE_FIELDS = frozenset(
    {
        "content",
        "memory_type",
        "subject_type",
        "subject_id",
        "confidence",
        "importance",
        "tags",
        "expires_at",
        "source",
        "metadata",
    }
)


def _invalid(field: str, message: str) -> ApplicationError:
    return ApplicationError("invalid", message, fields={field: [message]})


def _text(value: object, field: str, *, max_length: int, required: bool = False) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise _invalid(field, f"'{field}' must be a string.")
    value = value.strip()
    if "\x00" in value:
        raise _invalid(field, f"'{field}' must not contain NUL characters.")
    if required and not value:
        raise _invalid(field, f"'{field}' must not be empty.")
    if len(value) > max_length:
        raise _invalid(field, f"'{field}' is longer than {max_length} characters.")
    return value


def clean_memory_fields(fields: Mapping[str, Any], *, new: bool = True) -> dict[str, Any]:
    """``fields`` checked and normalised (a 400 ``invalid`` naming the field otherwise). A new
    memory must expire in the future; a change may set a past expiry (it expires the memory)."""
    clean: dict[str, Any] = {}
    for name, value in fields.items():
        check = _CHECKS.get(name)
        if check is None:
            raise ApplicationError("invalid", f"Unknown memory field: {name!r}.")
        clean[name] = check(value)
        if new and name == "expires_at" and value is not None and value <= timezone.now():
            raise _invalid("expires_at", "'expires_at' must be in the future.")
    return clean


def _memory_type(value: object) -> str:
    if value not in MemoryType.values:
        raise _invalid("memory_type", f"'memory_type' must be one of: {', '.join(MemoryType)}.")
    return str(value)


def _importance(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10:
        raise _invalid("importance", "'importance' must be a whole number from 1 to 10.")
    return value


def _uuid_or_none(value: object, field: str) -> uuid.UUID | None:
    if value in (None, ""):
        return None
    try:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    except ValueError:
        raise _invalid(field, f"'{field}' must be a UUID.") from None


def _confidence(value: object) -> Decimal:
    if value is None:
        return DEFAULT_CONFIDENCE
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal | str):
        raise _invalid("confidence", "'confidence' must be a number from 0 to 1.")
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        raise _invalid("confidence", "'confidence' must be a number from 0 to 1.") from None
    if not number.is_finite() or not 0 <= number <= 1:
        raise _invalid("confidence", "'confidence' must be a number from 0 to 1.")
    return number.quantize(Decimal("0.01"))


def _tags(value: object) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise _invalid("tags", "'tags' must be a list of strings.")
    tags: list[str] = []
    for item in value:
        tag = _text(item, "tags", max_length=TAG_MAX_CHARS)
        if tag and tag not in tags:
            tags.append(tag)
    if len(tags) > MAX_TAGS:
        raise _invalid("tags", f"At most {MAX_TAGS} tags.")
    return tags


def _expiry(value: object) -> datetime.datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime.datetime) or timezone.is_naive(value):
        raise _invalid("expires_at", "'expires_at' must be a date-time with a timezone.")
    return value


def _metadata(value: object) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _invalid("metadata", "'metadata' must be an object.")
    try:
        encoded = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        raise _invalid("metadata", "'metadata' must be plain JSON.") from None
    if len(encoded) > METADATA_MAX_BYTES or "\\u0000" in encoded:
        raise _invalid("metadata", f"'metadata' must be at most {METADATA_MAX_BYTES} bytes.")
    return value


_CHECKS: dict[str, Callable[[Any], Any]] = {
    "content": lambda value: _text(value, "content", max_length=CONTENT_MAX_CHARS, required=True),
    "memory_type": _memory_type,
    "subject_type": lambda value: _text(value, "subject_type", max_length=SUBJECT_TYPE_MAX_CHARS),
    "subject_id": lambda value: _uuid_or_none(value, "subject_id"),
    "confidence": _confidence,
    "importance": _importance,
    "tags": _tags,
    "expires_at": _expiry,
    "source": lambda value: _text(value, "source", max_length=SOURCE_MAX_CHARS),
    "metadata": _metadata,
}
