"""Finished runs with the rows quality scoring reads (steps, tool calls, approvals), built
directly: the scoring's unit tests need no worker."""

from __future__ import annotations

from typing import Any

from agents.models import Agent, Execution, ExecutionStatus, StepType, StopReason
from core import tenancy
from tests.agents.factories import ExecutionFactory, ExecutionStepFactory
from tests.tools.factories import ToolCallFactory
from tools.models import ToolCallStatus

CONTACT_ID = "6f1c2b1e-7d4a-4c55-9a53-1a7f7c0e2d11"
INSTRUCTION = "Log that Ada Lovelace called about pricing."


def finished_run(
    agent: Agent,
    *,
    calls: list[tuple[str, dict[str, Any], str]] | None = None,
    status: str = ExecutionStatus.COMPLETED,
    text: str = INSTRUCTION,
    **fields: Any,
) -> Execution:
    """A run of ``agent`` that ended with ``status``, its ``calls`` (tool, arguments, tool call
    status) recorded as act steps and tool calls."""
    calls = (
        calls
        if calls is not None
        else [
            ("crm_search_contacts", {"query": "Ada Lovelace"}, ToolCallStatus.COMPLETED),
            (
                "crm_add_note",
                {"contact_id": CONTACT_ID, "content": "Called about pricing."},
                ToolCallStatus.COMPLETED,
            ),
        ]
    )
    with tenancy.agency_context(agent.agency_id):
        execution = ExecutionFactory.create(
            agent=agent,
            input=text,
            status=status,
            stop_reason=StopReason.FINAL_ANSWER
            if status == ExecutionStatus.COMPLETED
            else StopReason.ERROR,
            output="Done." if status == ExecutionStatus.COMPLETED else "",
            llm_call_count=len(calls) + 1,
            **fields,
        )
        for number, (name, arguments, call_status) in enumerate(calls, start=1):
            failed = call_status == ToolCallStatus.FAILED
            output = {"error": {"code": "x", "message": "broke"}} if failed else {"ok": True}
            ExecutionStepFactory.create(
                execution=execution,
                step_number=number,
                step_type=StepType.ACT,
                tool_name=name,
                tool_input=arguments,
                tool_output=output,
            )
            ToolCallFactory.create(
                execution=execution,
                tool_name=name,
                input=arguments,
                status=call_status,
            )
    return execution
