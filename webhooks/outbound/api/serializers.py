"""Outbound webhook bodies and answers. The secret appears only in the answer to create and
rotate; a delivery's attempts are listed with it."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from core.api.fields import StrictSerializer
from webhooks.outbound.models import Delivery, DeliveryAttempt, Subscription
from webhooks.outbound.services import MAX_OVERLAP_SECONDS, MAX_URL

_TYPES_HELP = (
    "Event types (ai.execution.completed, ai.execution.failed, ai.approval.requested, ...) or "
    "patterns over their leading names (ai.*, ai.execution.*); * for every event."
)


class SubscriptionSerializer(serializers.ModelSerializer):
    previous_secret_signs_until = serializers.DateTimeField(
        source="previous_secret_expires_at",
        read_only=True,
        allow_null=True,
        help_text="After a rotation: until when deliveries carry the previous secret's "
        "signature too.",
    )

    class Meta:
        model = Subscription
        fields = [
            "id",
            "name",
            "url",
            "event_types",
            "is_active",
            "consecutive_failures",
            "disabled_at",
            "rotated_at",
            "previous_secret_signs_until",
            "created_by",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


class SubscriptionSecretSerializer(SubscriptionSerializer):
    secret = serializers.SerializerMethodField(
        help_text="The signing secret (whsec_...). Shown only in this response; store it now."
    )

    class Meta(SubscriptionSerializer.Meta):
        fields = [*SubscriptionSerializer.Meta.fields, "secret"]
        read_only_fields = fields

    def get_secret(self, obj: Any) -> str:
        return str(self.context["secret"])


class SubscriptionCreateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=200)
    # A CharField, not a URLField: the services say what is wrong with a URL (scheme, address).
    url = serializers.CharField(max_length=MAX_URL)
    event_types = serializers.ListField(
        child=serializers.CharField(max_length=200), max_length=50, help_text=_TYPES_HELP
    )
    is_active = serializers.BooleanField(default=True)


class SubscriptionUpdateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=200, required=False)
    url = serializers.CharField(max_length=MAX_URL, required=False)
    event_types = serializers.ListField(
        child=serializers.CharField(max_length=200),
        max_length=50,
        required=False,
        help_text=_TYPES_HELP,
    )
    is_active = serializers.BooleanField(
        required=False, help_text="true activates it again after an automatic disabling."
    )


class SubscriptionRotateSerializer(StrictSerializer):
    overlap_seconds = serializers.IntegerField(
        min_value=0,
        max_value=MAX_OVERLAP_SECONDS,
        required=False,
        help_text="How long deliveries are signed with the previous secret too (default "
        "AGENTDESK_OUTBOUND_WEBHOOK_ROTATION_OVERLAP_SECONDS; 0: none; at most 7 days).",
    )


class AttemptSerializer(serializers.ModelSerializer):
    class Meta:
        model = DeliveryAttempt
        fields = [
            "number",
            "manual",
            "created_at",
            "status_code",
            "latency_ms",
            "response_body",
            "error",
            "succeeded",
        ]
        read_only_fields = fields


class DeliverySerializer(serializers.ModelSerializer):
    message_id = serializers.CharField(read_only=True, help_text="The webhook-id header.")
    attempt_log = AttemptSerializer(many=True, read_only=True)

    class Meta:
        model = Delivery
        fields = [
            "id",
            "subscription",
            "message_id",
            "event_id",
            "event_type",
            "payload",
            "status",
            "attempts",
            "next_attempt_at",
            "last_status_code",
            "last_error",
            "succeeded_at",
            "created_at",
            "attempt_log",
        ]
        read_only_fields = fields
