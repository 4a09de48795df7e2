"""Serializers of the core endpoints: the event log and API keys."""

from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator
from rest_framework import serializers

from core.api.fields import AgencyRelatedField, JSONObjectField, StrictSerializer
from core.models import EVENT_TYPE_REGEX, Event, Role, Site
from core.models.api_keys import ApiKey

# The ai.* namespace is the platform's own lifecycle (seed 004): a client must not forge it.
RESERVED_EVENT_PREFIX = "ai."


class EventSerializer(serializers.ModelSerializer):
    class Meta:
        model = Event
        fields = [
            "id",
            "event_type",
            "payload",
            "site",
            "source_module",
            "source_entity_type",
            "source_entity_id",
            "actor_type",
            "actor_user",
            "actor_id",
            "idempotency_key",
            "source_execution_id",
            "chain_depth",
            "processed_at",
            "created_at",
        ]
        read_only_fields = fields


class EventEmitSerializer(StrictSerializer):
    event_type = serializers.CharField(
        max_length=200,
        validators=[
            RegexValidator(
                EVENT_TYPE_REGEX,
                "Must look like 'module.entity.action': lower-case letters, digits and "
                "underscores, dot-separated.",
            )
        ],
    )
    payload = JSONObjectField(required=False, default=dict)
    site = AgencyRelatedField(
        queryset=Site.objects.all(),
        required=False,
        allow_null=True,
        default=None,
    )
    idempotency_key = serializers.CharField(
        max_length=200,
        required=False,
        allow_blank=True,
        default="",
        help_text="The same key twice records one event (and starts agents once).",
    )

    def validate_event_type(self, value: str) -> str:
        if value.startswith(RESERVED_EVENT_PREFIX):
            raise serializers.ValidationError("The ai.* events are emitted by the platform itself.")
        return value


class ApiKeySerializer(serializers.ModelSerializer):
    class Meta:
        model = ApiKey
        fields = [
            "id",
            "name",
            "prefix",
            "role",
            "created_by",
            "created_at",
            "last_used_at",
            "revoked_at",
            "expires_at",
        ]
        read_only_fields = fields


class ApiKeyCreateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=200)
    role = serializers.ChoiceField(choices=Role.choices, default=Role.STAFF)
    expires_at = serializers.DateTimeField(
        required=False,
        allow_null=True,
        default=None,
        help_text="Refused from this moment on, like a revoked key (future; null: never).",
    )


class ApiKeyCreatedSerializer(ApiKeySerializer):
    key = serializers.SerializerMethodField(
        help_text="The full key. Shown only in this response; store it now."
    )

    class Meta(ApiKeySerializer.Meta):
        fields = [*ApiKeySerializer.Meta.fields, "key"]
        read_only_fields = fields

    def get_key(self, obj: Any) -> str:
        return str(self.context["key"])
