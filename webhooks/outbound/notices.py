"""The staff inbox's notice of an outbound webhook disabled after failing (core/notices.py)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.urls import reverse

from core.notices import Notice
from webhooks.outbound.models import Subscription

SHOWN = 20


def disabled_subscriptions(agency_id: uuid.UUID) -> list[Notice]:
    """Subscriptions disabled automatically and not activated since (one indexed query)."""
    found = Subscription.objects.filter(
        agency_id=agency_id, is_active=False, disabled_at__isnull=False
    ).order_by("-disabled_at")[:SHOWN]
    limit = settings.AGENTDESK_OUTBOUND_WEBHOOK_DISABLE_AFTER
    return [
        Notice(
            title=f"Outbound webhook disabled: {subscription.name}",
            text=f"{subscription.url} failed {limit} times in a row, so nothing is sent to it "
            "any more. Fix the receiver, then activate the webhook again (its delivery log "
            "says what it answered).",
            url=reverse("admin:webhooks_subscription_change", args=[subscription.pk]),
            at=subscription.disabled_at,
        )
        for subscription in found
        if subscription.disabled_at is not None
    ]
