"""How long a webhook's delivery ids are kept: as long as the agency keeps its trigger log
(``trigger_log_retention_days``), whose rows they go with (core/retention.py does the deleting).

A delivery id older than that may be sent again and start a run: by then no sender retries it.

Outbound deliveries (with their attempts) are kept as long as the agency keeps its events
(``event_retention_days``), whose deliveries they are.
"""

from __future__ import annotations

import datetime

from celery import shared_task
from django.db.models import QuerySet

from core.retention import Policy, purge_all_agencies
from webhooks.models import Delivery, WebhookDelivery


def _deliveries_past(before: datetime.datetime) -> QuerySet[WebhookDelivery]:
    return WebhookDelivery.objects.filter(created_at__lt=before)


def _outbound_past(before: datetime.datetime) -> QuerySet[Delivery]:
    return Delivery.objects.filter(created_at__lt=before)


DELIVERIES = Policy("webhook_deliveries", "trigger_log_retention_days", _deliveries_past)
OUTBOUND = Policy("outbound_webhook_deliveries", "event_retention_days", _outbound_past)


@shared_task(name="webhooks.purge_past_retention", ignore_result=True)
def purge_past_retention() -> int:
    """Beat: each agency's webhook delivery ids past its trigger log retention, and outbound
    deliveries past its event retention."""
    return purge_all_agencies([DELIVERIES, OUTBOUND])
