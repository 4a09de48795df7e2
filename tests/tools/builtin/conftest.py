"""Fixtures for the built-in tool handlers: real Agent/Execution rows and a ToolContext for them.

``call`` runs a handler the way the executor does: inside the execution's agency context, with
arguments first validated against the seeded Tool row's JSON Schema (so the tests also prove the
handlers accept exactly the seeded arguments).
"""

from __future__ import annotations

from typing import Any

import pytest

from agents.models import Execution
from core import tenancy
from tests.agents.factories import ExecutionFactory
from tools.handlers import ToolContext, ToolError, ToolResult
from tools.models import Tool, idempotency_key_for
from tools.registry import get_handler
from tools.validation import validate_arguments


def make_ctx(execution: Execution, tool_call_id: str = "call_1") -> ToolContext:
    return ToolContext(
        agency_id=execution.agency_id,
        site_id=execution.site_id,
        agent_id=execution.agent_id,
        execution_id=execution.id,
        tool_call_id=tool_call_id,
        idempotency_key=idempotency_key_for(execution.id, tool_call_id),
    )


def call(
    ctx: ToolContext, name: str, args: dict[str, Any], *, validate: bool = True
) -> dict[str, Any]:
    """The handler's output dict (``ToolResult.output`` for handlers that return one)."""
    result = call_raw(ctx, name, args, validate=validate)
    return result.output if isinstance(result, ToolResult) else result


def call_raw(
    ctx: ToolContext, name: str, args: dict[str, Any], *, validate: bool = True
) -> dict[str, Any] | ToolResult:
    with tenancy.agency_context(ctx.agency_id):
        if validate:
            schema = Tool.objects.get(name=name, is_system=True).parameters_schema
            errors = validate_arguments(schema, args)
            assert not errors, f"{name} arguments do not match the seeded schema: {errors}"
        function = get_handler(name)
        assert function is not None, f"no handler for {name}"
        return function(ctx, args)


def call_error(
    ctx: ToolContext, name: str, args: dict[str, Any], *, validate: bool = True
) -> ToolError:
    with pytest.raises(ToolError) as info:
        call_raw(ctx, name, args, validate=validate)
    return info.value


@pytest.fixture
def execution(db: None) -> Execution:
    return ExecutionFactory.create()


@pytest.fixture
def ctx(execution: Execution) -> ToolContext:
    return make_ctx(execution)


@pytest.fixture
def other_ctx(db: None) -> ToolContext:
    """A context of another agency (agency B)."""
    return make_ctx(ExecutionFactory.create())
