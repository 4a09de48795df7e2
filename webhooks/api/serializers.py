"""Webhook bodies and answers. The secret appears only in the answer to create and rotate."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from core.api.fields import StrictSerializer
from webhooks.models import Webhook
from webhooks.services import DEFAULT_GRACE_SECONDS, MAX_GRACE_SECONDS


class WebhookSerializer(serializers.ModelSerializer):
    url = serializers.CharField(
        read_only=True, help_text="Where a sender POSTs its signed deliveries."
    )
    previous_secret_valid_until = serializers.DateTimeField(
        source="previous_secret_expires_at",
        read_only=True,
        allow_null=True,
        help_text="After a rotation: until when the previous secret is still accepted.",
    )

    class Meta:
        model = Webhook
        fields = [
            "id",
            "agent",
            "name",
            "url",
            "is_enabled",
            "rotated_at",
            "previous_secret_valid_until",
            "last_delivery_at",
            "created_by",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


class WebhookSecretSerializer(WebhookSerializer):
    secret = serializers.SerializerMethodField(
        help_text="The signing secret. Shown only in this response; store it now."
    )

    class Meta(WebhookSerializer.Meta):
        fields = [*WebhookSerializer.Meta.fields, "secret"]
        read_only_fields = fields

    def get_secret(self, obj: Any) -> str:
        return str(self.context["secret"])


class WebhookCreateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=200)
    is_enabled = serializers.BooleanField(default=True)


class WebhookUpdateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=200, required=False)
    is_enabled = serializers.BooleanField(required=False)


class WebhookRotateSerializer(StrictSerializer):
    grace_seconds = serializers.IntegerField(
        min_value=0,
        max_value=MAX_GRACE_SECONDS,
        default=DEFAULT_GRACE_SECONDS,
        help_text="How long the current secret is still accepted (0: refused at once; at most "
        "7 days).",
    )
