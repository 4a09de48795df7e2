"""Outbound webhooks: an agency's subscriptions to events, each event's delivery to each, and the
attempts of a delivery (README "Outbound webhooks").

Re-exported by :mod:`webhooks.models` (the app's models module, which Django loads). A
subscription's secret is stored only as a Fernet token (:mod:`core.crypto`) and shown once, when
it is made (create, rotate); during a rotation's overlap the previous secret signs too
(:mod:`webhooks.rotation`, shared with inbound webhooks).
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models

from core.models import AgencyOwnedModel
from webhooks.rotation import RotatingSecretModel


class Subscription(RotatingSecretModel):
    """Where an agency wants some of its events POSTed, signed (Standard Webhooks)."""

    name = models.CharField(max_length=200)
    url = models.URLField("URL", max_length=2000)
    event_types = ArrayField(
        models.CharField(max_length=200),
        help_text="Event types (ai.execution.completed) or patterns over their leading names "
        "(ai.*, ai.execution.*); * for every event.",
    )
    is_active = models.BooleanField(
        "active", default=True, help_text="An inactive subscription is sent nothing."
    )
    # Failed attempts in a row, over all its deliveries (a success resets it): at
    # AGENTDESK_OUTBOUND_WEBHOOK_DISABLE_AFTER the subscription is disabled.
    consecutive_failures = models.PositiveIntegerField(default=0, editable=False)
    disabled_at = models.DateTimeField(
        "disabled automatically at", null=True, blank=True, editable=False
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        editable=False,
    )

    class Meta:
        ordering = ["name"]
        verbose_name = "outbound webhook"
        constraints = [
            models.UniqueConstraint(fields=["agency", "name"], name="webhooks_subscription_name"),
        ]
        indexes = [
            # Which active subscriptions take an event (the event bus's listener: &&).
            GinIndex(fields=["event_types"], name="webhooks_subscription_types"),
        ]

    def __str__(self) -> str:
        return self.name


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending"  # an attempt is due at next_attempt_at
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"  # out of retries, or its subscription disabled


class Delivery(AgencyOwnedModel):
    """One event for one subscription: the body sent on every attempt, under one ``webhook-id``."""

    subscription = models.ForeignKey(
        Subscription, on_delete=models.CASCADE, related_name="deliveries"
    )
    # No foreign key: the event log has its own retention; the body sent is kept here.
    event_id = models.UUIDField()
    event_type = models.CharField(max_length=200)
    payload = models.JSONField()
    status = models.CharField(
        max_length=20, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    # Set while a worker sends it: a second message for the same attempt finds it claimed.
    claimed_until = models.DateTimeField(null=True, blank=True, editable=False)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    succeeded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "outbound webhook delivery"
        verbose_name_plural = "outbound webhook deliveries"
        indexes = [
            models.Index(fields=["subscription", "-created_at"], name="webhooks_outdelivery_sub"),
            # Beat's sweep of due attempts whose message was lost or too far ahead for an ETA.
            models.Index(
                fields=["agency", "next_attempt_at"],
                name="webhooks_outdelivery_due",
                condition=models.Q(status="pending"),
            ),
            models.Index(fields=["agency", "created_at"], name="webhooks_outdelivery_age"),
        ]

    def __str__(self) -> str:
        return f"{self.event_type} -> {self.subscription_id}"

    @property
    def message_id(self) -> str:
        """The ``webhook-id`` header: the same on every attempt, so a receiver can dedupe."""
        return f"msg_{self.pk.hex}"


class DeliveryAttempt(AgencyOwnedModel):
    """One POST of a delivery and what came of it."""

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="attempt_log")
    number = models.PositiveIntegerField()
    manual = models.BooleanField(default=False, help_text="Re-sent by a person.")
    status_code = models.PositiveIntegerField(null=True, blank=True)
    latency_ms = models.PositiveIntegerField()
    response_body = models.TextField(blank=True)  # the first AGENTDESK_..._LOG_BYTES
    error = models.TextField(blank=True)
    succeeded = models.BooleanField(default=False)

    class Meta:
        ordering = ["delivery", "number"]
        verbose_name = "outbound webhook attempt"
        constraints = [
            models.UniqueConstraint(fields=["delivery", "number"], name="webhooks_attempt_number"),
        ]

    def __str__(self) -> str:
        return f"#{self.number}: {self.status_code or self.error[:40]}"
