"""Tools app factories. Children take their agency from their parent row."""

from __future__ import annotations

import uuid

import factory

from tests.agents.factories import ExecutionFactory
from tests.factories import AgencyFactory, TenantFactory
from tools.models import (
    HandlerType,
    McpServer,
    Tool,
    ToolCall,
    ToolCallStatus,
    ToolCategory,
    idempotency_key_for,
)


class ToolFactory(TenantFactory[Tool]):
    """An agency's own tool (system tools come from the data migration)."""

    class Meta:
        model = Tool

    agency = factory.SubFactory(AgencyFactory)
    name = factory.Sequence(lambda n: f"custom_tool_{n}")
    display_name = factory.Sequence(lambda n: f"Custom tool {n}")
    description = "An agency's own tool."
    category = ToolCategory.CUSTOM
    parameters_schema = factory.LazyFunction(
        lambda: {"type": "object", "properties": {"q": {"type": "string"}}}
    )
    handler_type = HandlerType.EXTERNAL
    is_system = False


class ToolCallFactory(TenantFactory[ToolCall]):
    class Meta:
        model = ToolCall

    execution = factory.SubFactory(ExecutionFactory)
    agency = factory.SelfAttribute("execution.agency")
    agent = factory.SelfAttribute("execution.agent")
    tool = factory.SubFactory(ToolFactory, agency=factory.SelfAttribute("..agency"))
    tool_name = factory.SelfAttribute("tool.name")
    tool_call_id = factory.Sequence(lambda n: f"call_{n}")
    idempotency_key = factory.LazyAttribute(
        lambda o: idempotency_key_for(o.execution.id, o.tool_call_id)
    )
    input = factory.LazyFunction(lambda: {"q": "hello"})
    status = ToolCallStatus.PENDING


class McpServerFactory(TenantFactory[McpServer]):
    """A registered MCP server (no tools until refreshed; no network here)."""

    class Meta:
        model = McpServer

    agency = factory.SubFactory(AgencyFactory)
    name = factory.Sequence(lambda n: f"MCP server {n}")
    slug = factory.Sequence(lambda n: f"srv{n}_{uuid.uuid4().hex[:6]}")
    url = "https://mcp.example.com/mcp"
