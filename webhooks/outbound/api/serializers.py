"""Outbound webhook bodies and answers. The secret appears only in the answer to create and
rotate; a delivery's attempts are listed with it."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from core.api.fields import StrictSerializer
from webhooks.outbound.events import ENTRY_REGEX, MAX_ENTRIES
from webhooks.outbound.models import Delivery, DeliveryAttempt, Subscription
from webhooks.outbound.services import MAX_OVERLAP_SECONDS, MAX_URL

# The form of a URL and of an entry (a 400); whether a URL's host may be reached and an ai.* name
# is one the platform emits are the services' to say (a 422).
URL_REGEX = r"^https?://[^\s#]+$"
_URL_ERRORS: dict[str, Any] = {
    "invalid": "The URL must start with https:// or http://, without spaces or #."
}
_ENTRY_ERRORS: dict[str, Any] = {
    "invalid": "Not an event type (lowercase dotted names like ai.execution.completed), a "
    "pattern like ai.* or ai.execution.*, or *."
}


def _url_field(*, required: bool = True) -> serializers.RegexField:
    return serializers.RegexField(
        URL_REGEX, max_length=MAX_URL, error_messages=_URL_ERRORS, required=required
    )


def _event_types_field(*, required: bool = True) -> serializers.ListField:
    entry = serializers.RegexField(ENTRY_REGEX, max_length=200, error_messages=_ENTRY_ERRORS)
    return serializers.ListField(
        child=entry,
        min_length=1,  # minItems in the schema (allow_empty=False is not shown there)
        max_length=MAX_ENTRIES,
        help_text=_TYPES_HELP,
        required=required,
    )


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
    url = _url_field()
    event_types = _event_types_field()
    is_active = serializers.BooleanField(default=True)


class SubscriptionUpdateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=200, required=False)
    url = _url_field(required=False)
    event_types = _event_types_field(required=False)
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
