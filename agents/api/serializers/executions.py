"""Serializers of executions (with their steps, read-only) and of a manual run: its request and
the answer it is accepted with."""

from __future__ import annotations

from rest_framework import serializers

from agents.models import INPUT_MAX_CHARS, Execution, ExecutionStep, StopReason
from core.api.fields import JSONObjectField, StrictSerializer


class ExecutionSerializer(serializers.ModelSerializer):
    stop_reason = serializers.ChoiceField(
        choices=StopReason.choices, allow_blank=True, read_only=True
    )
    agent_version = serializers.IntegerField(
        source="agent_version.number",
        read_only=True,
        allow_null=True,
        help_text="The number of the agent's version the run started with and keeps to its "
        "end (/agents/{agent}/versions/{number}/); null until its first claim, and for runs "
        "started before versions existed.",
    )

    class Meta:
        model = Execution
        fields = [
            "id",
            "agent",
            "agent_version",
            "site",
            "parent",
            "depth",
            "trigger_type",
            "trigger_event",
            "trigger_data",
            "triggered_by",
            "purpose",
            "status",
            "stop_reason",
            "cancel_requested_at",
            "wait_until",
            "input_request",
            "input",
            "output",
            "result",
            "actions_taken",
            "error",
            "error_details",
            "attempts",
            "current_step",
            "tokens_input",
            "tokens_output",
            "tokens_cache_read",
            "tokens_cache_write",
            "tokens_total",
            "cost_usd",
            "llm_call_count",
            "tool_call_count",
            "started_at",
            "completed_at",
            "duration_ms",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


class ExecutionStepSerializer(serializers.ModelSerializer):
    class Meta:
        model = ExecutionStep
        fields = [
            "id",
            "step_number",
            "step_type",
            "input_text",
            "reasoning",
            "output_text",
            "model",
            "llm_response",
            "tool_name",
            "tool_call_id",
            "tool_input",
            "tool_output",
            "started_at",
            "completed_at",
            "duration_ms",
            "tokens_input",
            "tokens_output",
            "tokens_cache_read",
            "tokens_cache_write",
            "cost_usd",
        ]
        read_only_fields = fields


class ExecutionDetailSerializer(ExecutionSerializer):
    steps = ExecutionStepSerializer(many=True, read_only=True)

    class Meta(ExecutionSerializer.Meta):
        fields = [*ExecutionSerializer.Meta.fields, "steps"]
        read_only_fields = fields


class ExecuteSerializer(StrictSerializer):
    input = serializers.CharField(
        max_length=INPUT_MAX_CHARS, required=False, allow_blank=True, default="",
        help_text="The instruction for this run.",
    )  # fmt: skip
    trigger_data = JSONObjectField(required=False, default=dict)


class ExecuteAcceptedSerializer(serializers.Serializer):
    execution_id = serializers.UUIDField()
    status = serializers.CharField()
