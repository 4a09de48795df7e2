"""Celery tasks of the platform core."""

from __future__ import annotations

from celery import shared_task

from core import retention


@shared_task(name="core.purge_past_retention", ignore_result=True)
def purge_past_retention() -> int:
    """Beat: processed events older than each agency's ``event_retention_days``."""
    return retention.purge_all_agencies([retention.EVENTS])
