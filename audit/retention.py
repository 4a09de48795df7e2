"""Audit entries past each agency's ``audit_retention_days`` (core/retention.py's schedule and
batches). The rows go through the database function ``audit_purge`` (audit.services), which
deletes only the oldest entries past the agency's retention and anchors the chain at the last
one it deleted, so that ``manage.py audit_verify`` still checks what is left. The platform chain
(no agency) is kept."""

from __future__ import annotations

import logging

from celery import shared_task

from audit.services import audit_purge
from core import tenancy
from core.models import Agency
from core.retention import BATCH, MAX_BATCHES

logger = logging.getLogger(__name__)


def purge_agency_entries(*, agency_id: object) -> int:
    deleted = 0
    for _ in range(MAX_BATCHES):
        batch = audit_purge(agency_id=agency_id, limit=BATCH)  # type: ignore[arg-type]
        deleted += batch
        if batch < BATCH:
            break
    if deleted:
        logger.info("retention: agency %s audit entries: %d deleted", agency_id, deleted)
    return deleted


@shared_task(name="audit.purge_past_retention", ignore_result=True)
def purge_past_retention() -> int:
    """Beat: each agency's audit entries past its audit retention (an agency that fails is
    logged and the others go on)."""
    with tenancy.platform_context():
        agencies = list(
            Agency.objects.filter(audit_retention_days__isnull=False).values_list("pk", flat=True)
        )
    total = 0
    for agency_id in agencies:
        try:
            total += purge_agency_entries(agency_id=agency_id)
        except Exception:
            logger.exception("retention: agency %s: audit purge failed", agency_id)
    return total
