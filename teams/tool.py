"""The ``delegate_to_agent`` tool: hand a sub-task to another agent of the agency and wait,
holding no worker, for its result (teams.services)."""

from __future__ import annotations

from typing import Any

from teams import services
from tools.handlers import ToolContext, ToolResult
from tools.registry import handler, resumer


@handler(services.TOOL_NAME)
def delegate_to_agent(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    slug, instruction, input_data = services.check_arguments(args)
    return services.delegation_start(
        ctx=ctx, agent_slug=slug, instruction=instruction, input_data=input_data
    )


@resumer(services.TOOL_NAME)
def delegated_result(
    ctx: ToolContext, args: dict[str, Any], waiting: dict[str, Any]
) -> dict[str, Any] | ToolResult:
    return services.delegation_result(ctx, waiting)
