"""Reads for watchers: which execution a principal may watch, its header (snapshot) and the
events it missed, rebuilt from the rows the runtime wrote (state transitions and steps share the
execution's event numbers).

Preconditions: called inside :func:`core.api.principal.principal_context` of the watcher, so
row-level security hides other agencies' rows as well.
"""

from __future__ import annotations

import bisect
import uuid
from typing import Any

from django.db.models import OuterRef, Subquery

from agents.lifecycle.protocol import (
    GROUP_EVENT,
    ExecutionEvent,
    clip_text,
    iso,
    status_data,
    step_data,
)
from agents.models import Execution, ExecutionStatus, ExecutionStep, StateTransition, StepType
from approvals.models import Approval, ApprovalStatus, QuestionKind
from core.api.principal import Principal
from core.selectors import access_object
from live import protocol
from tools.models import ToolCall, ToolCallStatus

_STEP_COLUMNS = (
    "sequence", "step_number", "step_type", "input_text", "reasoning", "output_text", "model",
    "tool_name", "tool_call_id", "tool_input", "tool_output", "tokens_input", "tokens_output",
    "cost_usd", "duration_ms", "started_at", "completed_at",
)  # fmt: skip


def execution_for_watcher(*, principal: Principal, execution_id: uuid.UUID | str) -> Execution:
    """The execution ``principal`` may watch (every role may); another agency's, a deleted and
    a made-up one raise the same ``Http404``, as the REST API's does."""
    executions = Execution.objects.select_related("agent")
    if principal.agency_id is not None:
        executions = executions.filter(agency_id=principal.agency_id)
    return access_object(executions, agency=None, id=execution_id)


def execution_snapshot(execution: Execution) -> protocol.Snapshot:
    waiting: protocol.Waiting | None = None
    if execution.status in (ExecutionStatus.WAITING_APPROVAL, ExecutionStatus.WAITING_INPUT):
        approval = (
            Approval.objects.filter(execution=execution, status=ApprovalStatus.PENDING)
            .order_by("-created_at")
            .only("id", "action_type")
            .first()
        )
        asked = (
            ToolCall.objects.filter(execution=execution, status=ToolCallStatus.WAITING_INPUT)
            .values_list("tool_call_id", "tool_name")
            .first()
        )
        waiting = {
            "approval_id": str(approval.id) if approval else None,
            "question_id": (execution.input_request or {}).get("question_id"),
            "tool_name": approval.action_type if approval else (asked[1] if asked else ""),
            "tool_call_id": asked[0] if asked else "",
            "input_request": execution.input_request or {},
            "wait_until": iso(execution.wait_until),
        }
    return {
        "type": "snapshot",
        "seq": execution.sequence,
        "execution_id": str(execution.id),
        "agent_id": str(execution.agent_id),
        "agent_name": execution.agent.name,
        "status": execution.status,
        "stop_reason": execution.stop_reason,
        "error": clip_text(execution.error),
        "output": clip_text(execution.output),
        "totals": {
            "tokens_total": execution.tokens_total,
            "cost_usd": str(execution.cost_usd),
            "llm_call_count": execution.llm_call_count,
            "tool_call_count": execution.tool_call_count,
            "failed_tool_calls": failed_tool_calls(execution),
            "current_step": execution.current_step,
        },
        "waiting": waiting,
        "asked": asked_calls(execution),
        "started_at": iso(execution.started_at),
        "completed_at": iso(execution.completed_at),
    }


def asked_calls(execution: Execution) -> dict[str, int]:
    """The run's calls that asked a person (ask_user), each with the ``seq`` of the park it
    caused: the first wait for input entered once the call was made (its row's ``started_at``,
    in the park's transaction). Its act step is written only with the answer, after that park
    and the resume; the run page draws it before that park."""
    park = (
        StateTransition.objects.filter(
            execution_id=execution.id,
            to_state=ExecutionStatus.WAITING_INPUT,
            entered_at__gte=OuterRef("started_at"),
        )
        .order_by("sequence")
        .values("sequence")[:1]
    )
    calls = (
        ToolCall.objects.filter(execution_id=execution.id, questions__kind=QuestionKind.QUESTION)
        .annotate(park=Subquery(park))
        .values_list("tool_call_id", "park")
    )
    return {call_id: seq for call_id, seq in calls if seq is not None}


def failed_tool_calls(execution: Execution) -> int:
    """Tool calls of the run that reported an error: a run may complete although some failed,
    and its page says so."""
    return ExecutionStep.objects.filter(
        execution_id=execution.id, step_type=StepType.ACT, tool_output__has_key="error"
    ).count()


def execution_events(
    *, execution: Execution, after: int, upto: int | None = None
) -> list[ExecutionEvent]:
    """The execution's events numbered ``after < seq <= upto`` (no upper bound: all committed),
    in order, as they were broadcast. Steps written before steps were numbered are left out."""
    transitions = list(
        StateTransition.objects.filter(execution_id=execution.id)
        .order_by("sequence")
        .values_list("sequence", "from_state", "to_state", "transition_reason")
    )
    steps = ExecutionStep.objects.filter(execution_id=execution.id, sequence__gt=after)
    if upto is not None:
        steps = steps.filter(sequence__lte=upto)
    base = {"execution_id": str(execution.id), "agent_id": str(execution.agent_id)}
    events: list[ExecutionEvent] = []
    for seq, from_state, to_state, reason in transitions:
        if seq > after and (upto is None or seq <= upto):
            data = status_data(from_status=from_state, to_status=to_state, reason=reason)
            events.append(_event(base, "status", seq, to_state, data))
    # A step's status is the one its run was in when it was written: the last state entered
    # before it (the runtime broadcasts execution.status at that moment).
    numbers = [seq for seq, *_ in transitions]
    for row in steps.values(*_STEP_COLUMNS):
        state = transitions[bisect.bisect_left(numbers, row["sequence"]) - 1][2]
        events.append(_event(base, "step", row["sequence"], state, step_data(row)))
    events.sort(key=lambda event: event["seq"])
    return events


def _event(base: dict[str, str], kind: Any, seq: int, status: str, data: Any) -> ExecutionEvent:
    return {
        "type": GROUP_EVENT,
        "kind": kind,
        "seq": seq,
        "execution_id": base["execution_id"],
        "agent_id": base["agent_id"],
        "status": status,
        "data": data,
    }
