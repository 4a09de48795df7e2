"""Serializer fields of tool settings."""

from __future__ import annotations

from rest_framework import serializers

from core.api.fields import documented
from tools.patterns import PATTERN_SCHEMA, InvalidPattern, validate_patterns

# A tool-name pattern ('crm_*'), as tools.patterns.validate_pattern takes it.
ToolPatternField = documented(serializers.CharField, PATTERN_SCHEMA, "ToolPatternField")


def validate_tool_patterns(value: list[str]) -> None:
    """A list field's validator: a 400 with each malformed tool pattern's message, in order."""
    try:
        validate_patterns(value)
    except InvalidPattern as exc:
        raise serializers.ValidationError(list(exc.messages)) from None
