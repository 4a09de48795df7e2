"""What a run's diagrams are drawn from, read once from its rows: steps, approvals, questions,
agent messages, child runs and state transitions (frozen, so the Mermaid functions stay pure).

Precondition for :func:`flow_record`: in the execution's agency context (every read is of that
agency's tables, under row-level security)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

from agents.models import AgentMessage, Execution, StateTransition
from agents.runtime.context_window import summary_turns
from approvals.models import Approval, Question


@dataclass(frozen=True, slots=True)
class StepRow:
    number: int
    step_type: str
    at: datetime.datetime
    tool_name: str = ""
    tool_input: Any = None
    error_code: str | None = None  # an act step whose output is an error
    tool_calls: tuple[tuple[str, Any], ...] = ()  # a think step's calls: (name, arguments)
    output_text: str = ""
    reasoning: str = ""
    input_text: str = ""
    trigger: str = ""
    summary: bool = False


@dataclass(frozen=True, slots=True)
class ApprovalRow:
    tool_name: str
    risk_level: str
    status: str
    asked_at: datetime.datetime
    decided_at: datetime.datetime | None = None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class QuestionRow:
    question: str
    status: str
    asked_at: datetime.datetime
    answer: str = ""
    answered_at: datetime.datetime | None = None


@dataclass(frozen=True, slots=True)
class MessageRow:
    outgoing: bool
    agent_key: str
    agent_name: str
    message_type: str
    is_request: bool
    at: datetime.datetime


@dataclass(frozen=True, slots=True)
class ChildRunRow:
    """A run this one started without a message recorded for it (an event it emitted)."""

    agent_key: str
    agent_name: str
    trigger_type: str
    status: str
    at: datetime.datetime


@dataclass(frozen=True, slots=True)
class TransitionRow:
    sequence: int
    from_state: str
    to_state: str
    transition_type: str = ""
    triggered_by: str = ""


@dataclass(frozen=True, slots=True)
class FlowRecord:
    agent_name: str
    status: str
    steps: tuple[StepRow, ...] = ()
    approvals: tuple[ApprovalRow, ...] = ()
    questions: tuple[QuestionRow, ...] = ()
    messages: tuple[MessageRow, ...] = ()
    children: tuple[ChildRunRow, ...] = ()
    transitions: tuple[TransitionRow, ...] = ()


def _error_code(output: Any) -> str | None:
    if isinstance(output, dict) and "error" in output:
        error = output["error"]
        return str(error.get("code", "error")) if isinstance(error, dict) else "error"
    return None


def _calls(llm_response: Any) -> tuple[tuple[str, Any], ...]:
    message = (llm_response or {}).get("message") if isinstance(llm_response, dict) else None
    calls = (message or {}).get("tool_calls") or []
    return tuple((str(c.get("name", "")), c.get("raw_arguments")) for c in calls)


def _trigger(execution: Execution, instruction: str) -> str:
    return f"{execution.trigger_type} trigger" + (f": {instruction}" if instruction else "")


def step_rows(execution: Execution) -> list[StepRow]:
    rows = []
    for step in execution.steps.order_by("step_number"):
        at = step.started_at or step.completed_at or step.created_at
        response = step.llm_response if isinstance(step.llm_response, dict) else {}
        rows.append(
            StepRow(
                number=step.step_number,
                step_type=step.step_type,
                at=at,
                tool_name=step.tool_name,
                tool_input=step.tool_input,
                error_code=_error_code(step.tool_output),
                tool_calls=_calls(step.llm_response),
                output_text=step.output_text,
                reasoning=step.reasoning,
                input_text=step.input_text if step.step_number > 1 else "",
                trigger=_trigger(execution, step.input_text) if step.step_number == 1 else "",
                summary=summary_turns(response) is not None,
            )
        )
    return rows


def flow_record(execution: Execution) -> FlowRecord:
    """The run's rows for its diagrams (a handful of indexed reads)."""
    approvals = [
        ApprovalRow(
            tool_name=a.action_type,
            risk_level=a.risk_level,
            status=a.status,
            asked_at=a.created_at,
            decided_at=a.decided_at,
            reason=a.decision_reason,
        )
        for a in Approval.objects.filter(execution_id=execution.pk).order_by("created_at")
    ]
    questions = [
        QuestionRow(
            question=q.question,
            status=q.status,
            asked_at=q.created_at,
            answer=q.user_response,
            answered_at=q.response_timestamp,
        )
        for q in Question.objects.filter(execution_id=execution.pk).order_by("created_at")
    ]
    messages: list[MessageRow] = []
    talked_to: set[Any] = set()
    sent = AgentMessage.objects.filter(from_execution_id=execution.pk).select_related("to_agent")
    received = AgentMessage.objects.filter(to_execution_id=execution.pk).select_related(
        "from_agent"
    )
    for m in sent.order_by("sent_at"):
        talked_to.add(m.to_execution_id)
        messages.append(_message(m, outgoing=True))
    for m in received.exclude(from_execution_id=execution.pk).order_by("sent_at"):
        talked_to.add(m.from_execution_id)
        messages.append(_message(m, outgoing=False))
    children = [
        ChildRunRow(
            agent_key=str(child.agent_id),
            agent_name=child.agent.name,
            trigger_type=child.trigger_type,
            status=child.status,
            at=child.created_at,
        )
        for child in Execution.objects.filter(parent_id=execution.pk)
        .select_related("agent")
        .order_by("created_at")
        if child.pk not in talked_to
    ]
    transitions = [
        TransitionRow(
            sequence=t.sequence,
            from_state=t.from_state,
            to_state=t.to_state,
            transition_type=t.transition_type,
            triggered_by=t.triggered_by_event,
        )
        for t in StateTransition.objects.filter(execution_id=execution.pk).order_by("sequence")
    ]
    return FlowRecord(
        agent_name=execution.agent.name,
        status=execution.status,
        steps=tuple(step_rows(execution)),
        approvals=tuple(approvals),
        questions=tuple(questions),
        messages=tuple(messages),
        children=tuple(children),
        transitions=tuple(transitions),
    )


def _message(m: AgentMessage, *, outgoing: bool) -> MessageRow:
    other = m.to_agent if outgoing else m.from_agent
    return MessageRow(
        outgoing=outgoing,
        agent_key=str(other.pk) if other is not None else "unknown",
        agent_name=other.name if other is not None else "",
        message_type=m.message_type,
        is_request=m.is_request,
        at=m.sent_at,
    )
