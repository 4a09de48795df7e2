"""The hash chain: each entry's hash is SHA-256 over a canonical JSON of the entry, which
includes the previous entry's hash (``prev_hash``). Changing, removing or inserting an entry
breaks every hash after it; :func:`verify_chain` finds the first break."""

from __future__ import annotations

import datetime
import decimal
import hashlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from audit.models import AuditChain, AuditEntry

REDACTED = "[redacted]"


def jsonable(value: Any) -> Any:  # noqa: PLR0911 - one return per kind of value
    """``value`` as JSON that PostgreSQL's jsonb stores and gives back unchanged: dates as ISO
    text, decimals and ids as text, no NUL characters (jsonb refuses them)."""
    if isinstance(value, str):
        return value.replace("\x00", "")
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, dict):
        return {str(key).replace("\x00", ""): jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(item) for item in value]
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        return value.astimezone(datetime.UTC).isoformat()
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return format(value.normalize(), "f")  # 0.70 and 0.7 alike
    if isinstance(value, uuid.UUID | datetime.timedelta):
        return str(value)
    if isinstance(value, bytes | memoryview):
        return REDACTED  # binary columns (files, encrypted blobs) are never copied here
    return str(value).replace("\x00", "")


def _numbers_alike(value: Any) -> Any:
    # jsonb keeps numbers as numeric: 1.0 may come back as 1 and 1e20 as an integer.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _numbers_alike(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_numbers_alike(item) for item in value]
    return value


def canonical(entry: AuditEntry) -> bytes:
    at = entry.at.astimezone(datetime.UTC).isoformat(timespec="microseconds")
    row = {
        "id": str(entry.id),
        "agency": str(entry.agency_id) if entry.agency_id else None,
        "seq": entry.seq,
        "at": at,
        "actor_type": entry.actor_type,
        "actor_user_id": entry.actor_user_id,
        "actor_api_key": entry.actor_api_key,
        "actor_display": entry.actor_display,
        "ip": entry.ip,
        "user_agent": entry.user_agent,
        "action": entry.action,
        "object_type": entry.object_type,
        "object_id": entry.object_id,
        "object_repr": entry.object_repr,
        "changes": _numbers_alike(entry.changes),
        "prev_hash": entry.prev_hash,
    }
    return json.dumps(row, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def entry_hash(entry: AuditEntry) -> str:
    return hashlib.sha256(canonical(entry)).hexdigest()


@dataclass(frozen=True)
class Break:
    """The first entry where a chain stops being verifiable, and why."""

    agency_id: uuid.UUID | None
    seq: int
    entry_id: uuid.UUID | None
    reason: str

    def __str__(self) -> str:
        where = f"agency {self.agency_id}" if self.agency_id else "the platform chain"
        row = f"entry {self.entry_id} (seq {self.seq})" if self.entry_id else f"seq {self.seq}"
        return f"{where}: {row}: {self.reason}"


def _entries(agency_id: uuid.UUID | None) -> Iterator[AuditEntry]:
    rows = (
        AuditEntry.objects.filter(agency_id=agency_id)
        if agency_id
        else (AuditEntry.objects.filter(agency__isnull=True))
    )
    return rows.order_by("seq").iterator(chunk_size=2000)


def verify_chain(chain: AuditChain) -> tuple[int, Break | None]:
    """Check one chain from its anchor to its head (the caller sets a context that sees it).
    Returns how many entries were checked and the first break, if any."""
    expected_seq, expected_prev = chain.anchor_seq + 1, chain.anchor_hash
    checked = 0
    for entry in _entries(chain.agency_id):
        if entry.seq != expected_seq:
            reason = f"expected seq {expected_seq}: entries are missing or were inserted"
            return checked, Break(chain.agency_id, entry.seq, entry.id, reason)
        if entry.prev_hash != expected_prev:
            reason = "its prev_hash is not the hash of the entry before it"
            return checked, Break(chain.agency_id, entry.seq, entry.id, reason)
        if entry_hash(entry) != entry.hash:
            reason = "its content does not match its hash (the row was changed)"
            return checked, Break(chain.agency_id, entry.seq, entry.id, reason)
        checked += 1
        expected_seq, expected_prev = entry.seq + 1, entry.hash
    if (expected_seq - 1, expected_prev) != (chain.head_seq, chain.head_hash):
        reason = f"the chain's head is seq {chain.head_seq}: later entries were removed"
        return checked, Break(chain.agency_id, expected_seq, None, reason)
    return checked, None
