"""Celery tasks of outbound webhooks (queue ``notify``): a delivery's attempt, beat's sweep."""

from __future__ import annotations

import uuid

from celery import shared_task

from webhooks.outbound.listener import MANUAL
from webhooks.outbound.sending import delivery_attempt, sweep_due


# Not a TenantTask: its tenant context would hold one transaction around the POST; the attempt
# enters the agency's context for its two short transactions only.
@shared_task(name="webhooks.deliver", ignore_result=True)
def deliver(delivery_id: str, mode: str, *, agency_id: str) -> bool:
    return delivery_attempt(
        delivery_id=uuid.UUID(delivery_id), agency_id=uuid.UUID(agency_id), manual=mode == MANUAL
    )


@shared_task(name="webhooks.sweep_due_deliveries", ignore_result=True)
def sweep_due_deliveries() -> int:
    return len(sweep_due())
