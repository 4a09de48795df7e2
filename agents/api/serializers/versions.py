"""Serializers of an agent's versions (read-only): the list, and one with its configuration."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agents.models import AgentVersion
from core.api.fields import JSONObjectField


class AgentVersionSerializer(serializers.ModelSerializer):
    restored_from = serializers.IntegerField(
        source="restored_from.number",
        read_only=True,
        allow_null=True,
        help_text="The number of the version this one restored, if it was a restore.",
    )
    change_summary = serializers.ListField(
        child=serializers.CharField(),
        read_only=True,
        help_text="The configuration fields this version changed from the one before "
        "(empty for version 1).",
    )
    is_current = serializers.SerializerMethodField(
        help_text="Whether this is the agent's configuration now."
    )

    class Meta:
        model = AgentVersion
        fields = [
            "number",
            "agent",
            "is_current",
            "change_summary",
            "restored_from",
            "created_by",
            "created_at",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.BooleanField())
    def get_is_current(self, version: AgentVersion) -> bool:
        return bool(version.id == self.context.get("current_version_id"))


class AgentVersionDetailSerializer(AgentVersionSerializer):
    config = JSONObjectField(
        read_only=True,
        help_text="The agent's configuration in this version: prompt, model, tools and "
        "policies, limits, triggers (the fields of an agent that are not identity, switches "
        "or stats).",
    )

    class Meta(AgentVersionSerializer.Meta):
        fields = [*AgentVersionSerializer.Meta.fields, "config"]
        read_only_fields = fields
