"""Serializer fields of tool settings."""

from __future__ import annotations

from rest_framework import serializers

from core.api.fields import documented
from tools.patterns import PATTERN_SCHEMA

# A tool-name pattern ('crm_*'), as tools.patterns.validate_pattern takes it.
ToolPatternField = documented(serializers.CharField, PATTERN_SCHEMA, "ToolPatternField")
