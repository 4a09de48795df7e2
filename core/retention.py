"""Deleting what is past an agency's retention, in small batches (DESIGN: retention is a beat job
of the app that owns the rows; this is the shared mechanism, each app's policies are its own:
agents/retention.py has the events', which depend on their runs).

Each batch is its own short transaction in the agency's context (row-level security applies):
the ids of at most ``BATCH`` rows are read, then those rows (still matching the policy) are
deleted with what cascades from them. No long lock, no long transaction: runs and requests go on
meanwhile, and a job cut off half-way (a deploy, a lost worker) loses nothing: the next one
carries on where it stopped.
"""

from __future__ import annotations

import datetime
import logging
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from core import tenancy
from core.models import Agency

logger = logging.getLogger(__name__)
BATCH = 200  # top-level rows per transaction (each with what cascades from it)
MAX_BATCHES = 500  # per agency and kind per job: a larger backlog is worked off over several jobs
PROGRESS_EVERY = 10  # batches between two progress lines of one agency and kind


@dataclass(frozen=True)
class Policy:
    """One kind of row: the Agency field that holds its retention in days (``None``: keep
    forever), and the deletable rows created before a cutoff (the current agency's, by RLS)."""

    kind: str
    days_field: str
    rows: Callable[[datetime.datetime], QuerySet[Any]]


def cutoff(days: int | None, now: datetime.datetime) -> datetime.datetime | None:
    return None if days is None else now - datetime.timedelta(days=days)


def purge_batches(*, agency_id: uuid.UUID, rows: QuerySet[Any], label: str) -> int:
    """Delete ``rows`` of one agency, one transaction per batch; returns how many (top-level
    rows; what cascaded is logged). Precondition: outside a transaction, or each batch is only
    a savepoint of the caller's."""
    model = rows.model._meta.label
    deleted = 0
    cascaded: Counter[str] = Counter()
    for batch in range(1, MAX_BATCHES + 1):
        with tenancy.agency_context(agency_id):
            ids = list(rows.order_by().values_list("pk", flat=True)[:BATCH])
            if not ids:
                break
            # Through the policy again, not by id alone: a row that stopped matching since it
            # was read (none should) is left alone.
            _, by_model = rows.filter(pk__in=ids).delete()
        deleted += by_model.get(model, 0)
        cascaded.update({name: n for name, n in by_model.items() if name != model})
        if batch % PROGRESS_EVERY == 0:
            logger.info("retention: %s: %d deleted so far (batch %d)", label, deleted, batch)
    else:
        logger.warning(
            "retention: %s: stopped after %d batches, the rest is left for the next job",
            label,
            MAX_BATCHES,
        )
    if deleted:
        logger.info(
            "retention: %s: %d deleted, with %s",
            label,
            deleted,
            dict(sorted(cascaded.items())) or "nothing cascading",
        )
    return deleted


def purge_agency(
    *,
    agency_id: uuid.UUID,
    days: Mapping[str, int | None],
    policies: Iterable[Policy],
    now: datetime.datetime,
) -> dict[str, int]:
    """Apply ``policies`` to one agency; ``days`` maps each policy's ``days_field`` to the
    agency's value. Returns the rows deleted by kind (kinds kept forever are absent)."""
    counts: dict[str, int] = {}
    for policy in policies:
        before = cutoff(days[policy.days_field], now)
        if before is None:
            continue
        counts[policy.kind] = purge_batches(
            agency_id=agency_id, rows=policy.rows(before), label=f"agency {agency_id} {policy.kind}"
        )
    return counts


def purge_all_agencies(policies: list[Policy], *, now: datetime.datetime | None = None) -> int:
    """Every agency, each in its own context; returns the rows deleted. An agency whose purge
    fails is logged with its error and the others go on (the next job tries it again)."""
    now = now or timezone.now()
    fields = sorted({policy.days_field for policy in policies})
    with tenancy.platform_context():
        agencies = list(Agency.objects.order_by("pk").values("id", *fields))
    total = 0
    failed = 0
    for agency in agencies:
        try:
            counts = purge_agency(agency_id=agency["id"], days=agency, policies=policies, now=now)
        except Exception:
            failed += 1
            logger.exception("retention: agency %s: purge failed", agency["id"])
            continue
        total += sum(counts.values())
    logger.info(
        "retention: %s: %d rows deleted in %d agencies%s",
        "+".join(policy.kind for policy in policies),
        total,
        len(agencies),
        f", {failed} failed" if failed else "",
    )
    return total
