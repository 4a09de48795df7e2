from __future__ import annotations

from django.core.validators import RegexValidator
from rest_framework import serializers

from core.api.fields import JSONObjectField, StrictSerializerMixin
from tools.models import TOOL_NAME_REGEX, Tool

READ_FIELDS = [
    "id",
    "agency",
    "name",
    "display_name",
    "description",
    "category",
    "parameters_schema",
    "returns_schema",
    "handler_type",
    "requires_permissions",
    "requires_modules",
    "rate_limit_per_minute",
    "rate_limit_per_hour",
    "is_dangerous",
    "is_system",
    "is_active",
    "created_at",
    "updated_at",
]


class ToolSerializer(serializers.ModelSerializer):
    """``handler_config`` is left out: it may name endpoints and credentials of a handler."""

    class Meta:
        model = Tool
        fields = READ_FIELDS
        read_only_fields = fields


def _names() -> serializers.ListField:
    return serializers.ListField(
        child=serializers.CharField(max_length=100), max_length=50, required=False
    )


class ToolWriteSerializer(StrictSerializerMixin, serializers.ModelSerializer):
    name = serializers.CharField(
        max_length=64,
        validators=[
            RegexValidator(
                TOOL_NAME_REGEX, "Lower-case letters, digits and underscores, starting a letter."
            )
        ],
    )
    description = serializers.CharField(max_length=5000)
    parameters_schema = JSONObjectField(help_text="JSON Schema (Draft 2020-12) of an object.")
    returns_schema = JSONObjectField(required=False, allow_null=True)
    handler_config = JSONObjectField(required=False)
    requires_permissions = _names()
    requires_modules = _names()

    class Meta:
        model = Tool
        fields = [
            "name",
            "display_name",
            "description",
            "category",
            "parameters_schema",
            "returns_schema",
            "handler_type",
            "handler_config",
            "requires_permissions",
            "requires_modules",
            "rate_limit_per_minute",
            "rate_limit_per_hour",
            "is_dangerous",
            "is_active",
        ]
        validators: list[object] = []  # a duplicate name is the service's field error
        extra_kwargs = {
            "rate_limit_per_minute": {"min_value": 1},
            "rate_limit_per_hour": {"min_value": 1},
        }
