"""The audit log's only writers: :func:`audit_record` appends an entry to its agency's chain
(or the platform's), :func:`audit_purge` removes what is past the agency's retention."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from django.db import connection
from django.utils import timezone

from audit.chain import entry_hash, jsonable
from audit.context import Actor, current_actor
from audit.models import AuditChain, AuditEntry
from core import tenancy

_OPEN_CHAIN = (
    "INSERT INTO audit_auditchain (agency_id, head_seq, head_hash, anchor_seq, anchor_hash)"
    " VALUES (%s, 0, '', 0, '') ON CONFLICT DO NOTHING"
)


@contextmanager
def _chain_scope(agency_id: uuid.UUID | None) -> Iterator[None]:
    # The entry is written in its own chain's tenant (a savepoint of the caller's transaction):
    # a login has no tenant yet, an agency's deletion goes to the platform chain.
    if agency_id is None:
        with tenancy.platform_context():
            yield
    else:
        with tenancy.agency_context(agency_id):
            yield


def _text(value: object, limit: int) -> str:
    return str(value).replace("\x00", "")[:limit]


def audit_record(
    *,
    action: str,
    agency_id: uuid.UUID | str | None,
    object_type: str = "",
    object_id: object = "",
    object_repr: object = "",
    changes: Mapping[str, Sequence[Any]] | None = None,
    actor: Actor | None = None,
) -> AuditEntry:
    """Append one entry to the chain of ``agency_id`` (``None``: the platform's).

    In the caller's transaction (a savepoint), so an entry stands or falls with the change it
    records. The chain's head row is locked (``SELECT ... FOR UPDATE``) until that transaction
    ends: entries of one agency are appended one at a time, each hashing the one before. So a
    transaction that changes several rows takes their locks before its first audited change
    (:func:`approvals.bulk.approval_bulk_approve`): locking a row after auditing could wait
    for another transaction that holds it and waits for the chain, a deadlock.
    ``changes``: ``{field: [before, after]}``, secrets already replaced by the caller
    (:data:`audit.chain.REDACTED`). ``actor``: default, the current request's or the system.
    """
    actor = actor or current_actor()
    agency = uuid.UUID(str(agency_id)) if agency_id else None
    with _chain_scope(agency):
        with connection.cursor() as cursor:
            cursor.execute(_OPEN_CHAIN, [agency])
        chains = AuditChain.objects.select_for_update()
        chain = chains.get(agency_id=agency) if agency else chains.get(agency__isnull=True)
        entry = AuditEntry(
            agency_id=agency,
            seq=chain.head_seq + 1,
            at=timezone.now(),
            actor_type=actor.type,
            actor_user_id=actor.user_id,
            actor_api_key=actor.api_key,
            actor_display=_text(actor.display, 255),
            ip=actor.ip,
            user_agent=_text(actor.user_agent, 512),
            action=action,
            object_type=_text(object_type, 100),
            object_id=_text(object_id, 64),
            object_repr=_text(object_repr, 255),
            changes=jsonable(dict(changes or {})),
            prev_hash=chain.head_hash,
        )
        entry.hash = entry_hash(entry)
        entry.save(force_insert=True)
        chain.head_seq, chain.head_hash = entry.seq, entry.hash
        chain.save(update_fields=["head_seq", "head_hash"])
    return entry


def audit_purge(*, agency_id: uuid.UUID, limit: int) -> int:
    """Delete up to ``limit`` of the agency's oldest entries past its ``audit_retention_days``
    (none when it keeps them forever) and anchor the chain at the last one deleted; returns
    how many. Done by the database function ``audit_purge`` (migration 0002), the only way the
    runtime role can delete entries; it reads the retention itself, so no caller can ask for
    more. Its own transaction in the agency's context."""
    with tenancy.agency_context(agency_id), connection.cursor() as cursor:
        cursor.execute("SELECT audit_purge(%s, %s)", [agency_id, limit])
        (deleted,) = cursor.fetchone() or (0,)
    return int(deleted)


def audit_cutoff(
    days: int | None, now: datetime.datetime | None = None
) -> datetime.datetime | None:
    return None if days is None else (now or timezone.now()) - datetime.timedelta(days=days)
