"""Inbound webhooks: a signed URL per agent that starts a run with the request's JSON body as its
trigger payload (seed 004: webhooks as a perception source).

The secret is stored only as a Fernet token (:mod:`core.crypto`, like LLM provider keys) and shown
once, when it is made (create, rotate). A rotation keeps the previous secret valid until
``previous_secret_expires_at`` (the grace period), so that a sender can switch without losing
deliveries (:mod:`webhooks.rotation`, shared with outbound subscriptions). Every delivery a
sender names with an id is recorded once per webhook (:class:`WebhookDelivery`, a unique
constraint): the same id again starts nothing.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from agents.models import Agent, Execution
from core.models import AgencyOwnedModel
from core.tokens import readable_secret
from webhooks.rotation import RotatingSecretModel

SECRET_PREFIX = "whsec_"  # noqa: S105 - a prefix, not a secret


def new_secret() -> str:
    # Secrets made before (token_urlsafe, which mixed l and I) stay valid: a secret is compared
    # as stored, never checked for its letters.
    return SECRET_PREFIX + readable_secret()


class Webhook(RotatingSecretModel):
    """One inbound URL of an agent: ``POST /api/v1/webhooks/<id>/`` (see README "Webhooks").

    Row-level security: the agency policy, plus a SELECT-only policy that shows the one row whose
    id :func:`webhooks.selectors.webhook_lookup_context` names, so that a delivery (which carries
    no credential but its signature) can find its webhook before any tenant is set.
    """

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="webhooks")
    name = models.CharField(max_length=200)
    is_enabled = models.BooleanField(
        "enabled", default=True, help_text="A disabled webhook refuses every delivery (logged)."
    )
    last_delivery_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        editable=False,
    )

    class Meta:
        ordering = ["name"]  # not by agent: a join the lookup context (no tenant) cannot see
        constraints = [
            models.UniqueConstraint(fields=["agent", "name"], name="webhooks_webhook_name_uniq"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def path(self) -> str:
        return f"/api/v1/webhooks/{self.pk}/"

    @property
    def url(self) -> str:
        return settings.AGENTDESK_BASE_URL.rstrip("/") + self.path


class WebhookDelivery(AgencyOwnedModel):
    """A delivery id a sender used on a webhook, once: the idempotency key of the delivery.

    The unique constraint is what makes a replay (or the same delivery sent twice at once) start
    nothing: the second insert waits for the first transaction and then fails.
    """

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    delivery_id = models.CharField(max_length=200)
    execution = models.ForeignKey(
        Execution, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "webhook deliveries"
        constraints = [
            models.UniqueConstraint(
                fields=["webhook", "delivery_id"], name="webhooks_delivery_id_uniq"
            ),
        ]
        indexes = [
            # The retention purge (by agency, then age).
            models.Index(fields=["agency", "created_at"], name="webhooks_delivery_age_idx"),
        ]

    def __str__(self) -> str:
        return self.delivery_id


# Outbound webhooks (webhooks/outbound/): loaded with the app's models.
from webhooks.outbound.models import (  # noqa: E402
    Delivery,
    DeliveryAttempt,
    DeliveryStatus,
    Subscription,
)

__all__ = [
    "SECRET_PREFIX",
    "Delivery",
    "DeliveryAttempt",
    "DeliveryStatus",
    "Subscription",
    "Webhook",
    "WebhookDelivery",
    "new_secret",
]
