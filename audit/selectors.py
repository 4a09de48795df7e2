"""Reads of the audit log (the caller's tenant context decides which chains are visible)."""

from __future__ import annotations

import datetime
from collections.abc import Iterator

from django.db.models import Q, QuerySet

from audit.models import AuditEntry

EXPORT_CHUNK = 2000


def audit_entries(
    *,
    since: datetime.datetime | None = None,
    until: datetime.datetime | None = None,
    actor: str = "",
    actor_type: str = "",
    action: str = "",
    object_type: str = "",
    object_id: str = "",
) -> QuerySet[AuditEntry]:
    """Entries in time order. ``actor``: a user's id or name, or an API key's prefix;
    ``action`` ending in ``.``: every action of that kind (``api_key.``)."""
    rows = AuditEntry.objects.all()
    if since is not None:
        rows = rows.filter(at__gte=since)
    if until is not None:
        rows = rows.filter(at__lt=until)
    if actor:
        who = Q(actor_display=actor) | Q(actor_api_key=actor)
        if actor.isdigit():
            who |= Q(actor_user_id=int(actor))
        rows = rows.filter(who)
    if actor_type:
        rows = rows.filter(actor_type=actor_type)
    if action:
        rows = (
            rows.filter(action__startswith=action)
            if action.endswith(".")
            else rows.filter(action=action)
        )
    if object_type:
        rows = rows.filter(object_type=object_type)
    if object_id:
        rows = rows.filter(object_id=object_id)
    return rows.order_by("at", "agency_id", "seq")


def iterate(rows: QuerySet[AuditEntry]) -> Iterator[AuditEntry]:
    """A server-side cursor: an export of any length in constant memory. Precondition: in a
    transaction (the export's tenant context)."""
    return rows.iterator(chunk_size=EXPORT_CHUNK)
