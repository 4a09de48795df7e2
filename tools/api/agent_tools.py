"""One agent's tool configuration: its allowed and denied tool-name patterns and tool limits,
with what they give it — each tool of the agency (its own and the platform's, active) and
whether a run of the agent is offered it, and if not, why (the runtime's decision,
:func:`tools.access.decide_tool`). Tools carry no per-agent settings of their own beyond these:
a tool's rate limits, schema and risk are the tool's and the risk rules'."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from agents.models import Agent
from agents.models.agent import MAX_CORRECTIONS
from agents.services import agent_update
from core.api.base import TenantScopedView, parse_id
from core.api.fields import StrictSerializer
from core.selectors import access_object
from tools import registry
from tools.access import decide_tool
from tools.api.fields import ToolPatternField, validate_tool_patterns
from tools.selectors import active_tools, agency_enabled_modules

NOT_INSTALLED = "not_installed"
MAX_PATTERNS = 100


class AgentToolSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    display_name = serializers.CharField()
    category = serializers.CharField()
    is_dangerous = serializers.BooleanField()
    is_system = serializers.BooleanField()
    offered = serializers.BooleanField(help_text="Whether the agent's runs are offered it.")
    code = serializers.CharField(
        help_text="Why not, when not: tool_not_allowed, missing_permission, module_disabled, "
        "not_installed; empty when offered."
    )
    reason = serializers.CharField()


class AgentToolConfigSerializer(serializers.Serializer):
    agent = serializers.UUIDField()
    allowed_tools = serializers.ListField(child=serializers.CharField())
    denied_tools = serializers.ListField(child=serializers.CharField())
    max_tool_calls_per_step = serializers.IntegerField()
    max_corrections = serializers.IntegerField()
    tools = AgentToolSerializer(many=True)


def _patterns() -> serializers.ListField:
    return serializers.ListField(
        child=ToolPatternField(max_length=100),
        max_length=MAX_PATTERNS,
        required=False,
        validators=[validate_tool_patterns],
        help_text="Tool-name patterns with * wildcards ('crm_*', 'email_send'); denied wins; "
        "an empty allowed list allows nothing.",
    )


class AgentToolConfigWriteSerializer(StrictSerializer):
    allowed_tools = _patterns()
    denied_tools = _patterns()
    # The column's range (an integer): larger is a 400, not a database error.
    max_tool_calls_per_step = serializers.IntegerField(
        required=False, min_value=1, max_value=2_147_483_647
    )
    max_corrections = serializers.IntegerField(
        required=False,
        min_value=0,
        max_value=MAX_CORRECTIONS,
        help_text="Failures of one tool in a run before a person is asked; 0: never ask.",
    )


def tool_config(agent: Agent) -> dict[str, Any]:
    """The agent's patterns and limits, and each active tool with the runtime's decision."""
    modules = agency_enabled_modules(agent.agency_id)
    tools = []
    for tool in active_tools(agent.agency_id).order_by("name"):
        if not registry.is_installed(tool.name):
            offered, code, reason = False, NOT_INSTALLED, "No handler is installed for it."
        else:
            decision = decide_tool(
                tool.name,
                requires_permissions=tool.requires_permissions,
                requires_modules=tool.requires_modules,
                allowed=agent.allowed_tools,
                denied=agent.denied_tools,
                enabled_modules=modules,
            )
            offered, code, reason = decision.allowed, decision.code, decision.message
        tools.append(
            {
                "id": tool.id,
                "name": tool.name,
                "display_name": tool.display_name,
                "category": tool.category,
                "is_dangerous": tool.is_dangerous,
                "is_system": tool.is_system,
                "offered": offered,
                "code": code,
                "reason": reason,
            }
        )
    return {
        "agent": agent.id,
        "allowed_tools": agent.allowed_tools,
        "denied_tools": agent.denied_tools,
        "max_tool_calls_per_step": agent.max_tool_calls_per_step,
        "max_corrections": agent.max_corrections,
        "tools": tools,
    }


AGENT_ID = OpenApiParameter("agent_id", OpenApiTypes.UUID, OpenApiParameter.PATH)
CONFIG_EXAMPLE = {
    "agent": "9a1b2c3d-0000-4000-8000-000000000001",
    "allowed_tools": ["crm_*", "email_send"],
    "denied_tools": ["crm_delete_*"],
    "max_tool_calls_per_step": 3,
    "max_corrections": 3,
    "tools": [
        {
            "id": "1f2e3d4c-0000-4000-8000-000000000002",
            "name": "crm_delete_contact",
            "display_name": "Delete contact",
            "category": "crm",
            "is_dangerous": True,
            "is_system": True,
            "offered": False,
            "code": "tool_not_allowed",
            "reason": "Tool 'crm_delete_contact' is denied by pattern 'crm_delete_*'.",
        }
    ],
}


class AgentToolConfigView(TenantScopedView):
    """Staff and admins change it (like the agent itself); every member reads it."""

    def agent(self) -> Agent:
        agents = self.scope(Agent.objects.all())
        return access_object(agents, agency=None, id=parse_id(self.kwargs["agent_id"]))

    @extend_schema(
        operation_id="agents_tools_retrieve",
        summary="The agent's tool configuration and the tools it is offered",
        parameters=[AGENT_ID],
        responses={200: AgentToolConfigSerializer},
        examples=[OpenApiExample("Configuration", value=CONFIG_EXAMPLE, response_only=True)],
    )
    def get(self, request: Request, agent_id: str) -> Response:
        return Response(AgentToolConfigSerializer(tool_config(self.agent())).data)

    @extend_schema(
        operation_id="agents_tools_partial_update",
        summary="Change the agent's tool patterns and limits (emits ai.agent.updated)",
        description="Makes a new version of the agent, like any change of its configuration.",
        parameters=[AGENT_ID],
        request=AgentToolConfigWriteSerializer,
        responses={200: AgentToolConfigSerializer},
        examples=[
            OpenApiExample(
                "CRM without deletes",
                value={"allowed_tools": ["crm_*"], "denied_tools": ["crm_delete_*"]},
                request_only=True,
            )
        ],
    )
    def patch(self, request: Request, agent_id: str) -> Response:
        agent = self.agent()
        body = AgentToolConfigWriteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        if body.validated_data:
            agent = agent_update(agent=agent, user_id=self.principal.user_id, **body.validated_data)
        return Response(AgentToolConfigSerializer(tool_config(agent)).data)
