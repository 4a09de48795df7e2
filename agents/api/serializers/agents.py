"""Serializers of agents: read (with their goals) and written (create or patch), with the rules
the API schema states for clients (event subscriptions, tool patterns, the context budget)."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from rest_framework import serializers

from agents.inputs import InvalidInputSchema, validate_input_schema
from agents.models import (
    AGENT_STATS_FIELDS,
    Agent,
    AgentGoal,
    AgentTemplate,
    Comparison,
)
from agents.models.agent import (
    MAX_TOKEN_BUDGET,
    MIN_CONTEXT_TOKEN_BUDGET,
    validate_context_token_budget,
)
from agents.schedules import InvalidCron, parse_cron
from agents.triggers import (
    SUBSCRIPTION_REGEX,
    InvalidConditions,
    event_type_error,
    validate_conditions,
)
from core.api.exceptions import RULE
from core.api.fields import (
    AgencyRelatedField,
    JSONListField,
    JSONObjectField,
    StrictSerializerMixin,
    documented,
)
from core.models import Site
from tools.api.fields import ToolPatternField, validate_tool_patterns

MAX_LIST_ITEMS = 100
POSITIVE_FIELDS = (
    "max_tokens",
    "max_steps_per_run",
    "max_tool_calls_per_step",
    "timeout_seconds",
    "max_runs_per_hour",
    "max_runs_per_day",
    "human_timeout_minutes",
)
AGENT_WRITE_FIELDS = [
    "name",
    "slug",
    "site",
    "template",
    "description",
    "avatar_url",
    "personality",
    "agent_type",
    "domain",
    "capabilities",
    "system_prompt",
    "constraints",
    "examples",
    "input_schema",
    "trigger_events",
    "trigger_schedule",
    "trigger_conditions",
    "llm_provider",
    "llm_model",
    "temperature",
    *POSITIVE_FIELDS,
    "max_corrections",
    "deny_may_continue",
    "understanding_enabled",
    "understanding_threshold",
    "memory_token_budget",
    "memory_extraction_enabled",
    "context_token_budget",
    "conversation_window",
    "conversation_ttl_hours",
    "allowed_tools",
    "denied_tools",
    "is_active",
    "is_public",
]


# An event subscription ('crm.contact.created', 'crm.contact.*'), as event_type_error takes it.
SubscriptionField = documented(
    serializers.CharField,
    {"type": "string", "maxLength": 200, "pattern": SUBSCRIPTION_REGEX},
    "SubscriptionField",
)


# 0 (no limit), or enough for a system prompt and a step (validate_context_token_budget).
ContextBudgetField = documented(
    serializers.IntegerField,
    {
        "type": "integer",
        "maximum": MAX_TOKEN_BUDGET,
        "anyOf": [{"minimum": 0, "maximum": 0}, {"minimum": MIN_CONTEXT_TOKEN_BUDGET}],
    },
    "ContextBudgetField",
)


def _names(
    max_length: int, child: type[serializers.CharField] = serializers.CharField, **options: Any
) -> serializers.ListField:
    return serializers.ListField(
        child=child(max_length=max_length), max_length=MAX_LIST_ITEMS, required=False, **options
    )


class AgentGoalSerializer(serializers.ModelSerializer):
    # Declared: DRF drops allow_blank from read-only model fields, and "" is a stored value.
    comparison = serializers.ChoiceField(
        choices=Comparison.choices, allow_blank=True, read_only=True
    )

    class Meta:
        model = AgentGoal
        fields = [
            "id",
            "name",
            "description",
            "priority",
            "success_metric",
            "target_value",
            "comparison",
            "is_recurring",
            "deadline",
            "current_value",
            "is_achieved",
            "achieved_at",
        ]
        read_only_fields = fields


class AgentSerializer(serializers.ModelSerializer):
    goals = AgentGoalSerializer(many=True, read_only=True)
    avatar_url = serializers.CharField(read_only=True)  # "" when unset: not a URI

    class Meta:
        model = Agent
        fields = [
            "id",
            *AGENT_WRITE_FIELDS,
            "goals",
            *AGENT_STATS_FIELDS,
            "created_by",
            "updated_by",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


def _by_rule(
    check: Callable[[Any], None],
    invalid: type[InvalidConditions] | type[InvalidInputSchema],
    value: dict[str, Any],
) -> dict[str, Any]:
    """``value`` if ``check`` passes it, else a rule's field error (422) with its messages."""
    try:
        check(value)
    except invalid as exc:
        raise serializers.ValidationError(exc.messages, code=RULE) from None
    return value


class AgentWriteSerializer(StrictSerializerMixin, serializers.ModelSerializer):
    """Create (``site``, ``name``, ``agent_type`` and ``system_prompt`` required) or patch."""

    site = AgencyRelatedField(queryset=Site.objects.all())
    template = AgencyRelatedField(
        queryset=AgentTemplate.objects.all(), include_shared=True, required=False, allow_null=True
    )
    description = serializers.CharField(max_length=5000, required=False, allow_blank=True)
    personality = serializers.CharField(max_length=5000, required=False, allow_blank=True)
    system_prompt = serializers.CharField(max_length=50_000)
    capabilities = _names(100)
    trigger_events = _names(200, SubscriptionField)
    allowed_tools = _names(100, ToolPatternField, validators=[validate_tool_patterns])
    denied_tools = _names(100, ToolPatternField, validators=[validate_tool_patterns])
    constraints = JSONListField(required=False)
    examples = JSONListField(required=False)
    input_schema = JSONObjectField(
        required=False, help_text=Agent._meta.get_field("input_schema").help_text
    )
    trigger_conditions = JSONObjectField(
        required=False,
        help_text='Conditions on the event payload, all of which must hold: {"key": value} '
        'or {"key": [one, of]}, dotted keys for nested values (e.g. {"source": "web"}). {} '
        "starts on every event; manual and scheduled runs ignore them.",
    )
    temperature = serializers.DecimalField(
        max_digits=3,
        decimal_places=2,
        min_value=Decimal(0),
        max_value=Decimal(2),
        required=False,
    )
    context_token_budget = ContextBudgetField(
        min_value=0,
        max_value=MAX_TOKEN_BUDGET,
        validators=[validate_context_token_budget],
        required=False,
        help_text=Agent._meta.get_field("context_token_budget").help_text,
    )

    class Meta:
        model = Agent
        fields = AGENT_WRITE_FIELDS
        # A duplicate slug per site is the service's field error (one rule, one message).
        validators: list[Any] = []
        extra_kwargs = {
            "slug": {"required": False},
            **{name: {"min_value": 1} for name in POSITIVE_FIELDS},
        }

    def validate_trigger_schedule(self, value: str) -> str:
        if value:
            try:
                parse_cron(value)
            except InvalidCron as exc:
                raise serializers.ValidationError(str(exc), code=RULE) from None
        return value

    def validate_trigger_events(self, value: list[str]) -> list[str]:
        errors = [message for name in value if (message := event_type_error(name))]
        if errors:
            raise serializers.ValidationError(errors)
        return value

    def validate_input_schema(self, value: dict[str, Any]) -> dict[str, Any]:
        return _by_rule(validate_input_schema, InvalidInputSchema, value)

    def validate_trigger_conditions(self, value: dict[str, Any]) -> dict[str, Any]:
        return _by_rule(validate_conditions, InvalidConditions, value)
