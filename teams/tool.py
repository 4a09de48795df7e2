"""The ``delegate_to_agent`` tool: hand a sub-task to another agent of the agency and wait,
holding no worker, for its result (teams.services.delegate)."""

from __future__ import annotations

from typing import Any

from teams.services import delegate
from tools.handlers import ToolContext, ToolResult
from tools.registry import handler, resumer


@handler(delegate.TOOL_NAME)
def delegate_to_agent(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    slug, instruction, input_data = delegate.check_arguments(args)
    return delegate.delegation_start(
        ctx=ctx, agent_slug=slug, instruction=instruction, input_data=input_data
    )


@resumer(delegate.TOOL_NAME)
def delegated_result(
    ctx: ToolContext, args: dict[str, Any], waiting: dict[str, Any]
) -> dict[str, Any] | ToolResult:
    return delegate.delegation_result(ctx, waiting)
