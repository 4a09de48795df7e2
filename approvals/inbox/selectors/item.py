"""One item of the inbox: an approval or a question by id (another agency's is not found), and
what led to it: the run's trigger and its latest steps, a correction's failed calls."""

from __future__ import annotations

import datetime
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.urls import reverse
from django.utils import timezone

from agents.models import Execution, ExecutionStep, StepType, TriggerType
from approvals.describe import clip
from approvals.models import Approval, Question
from core.models import Agency
from core.selectors import access_object

STEP_LIMIT = 40  # the latest steps of the run shown beside an item
STEP_TEXT_CHARS = 600
STEP_OUTPUT_CHARS = 400
STARTED_BY: dict[str, str] = {
    TriggerType.MANUAL: "started by a person",
    TriggerType.EVENT: "started by an event",
    TriggerType.SCHEDULE: "started on its schedule",
    TriggerType.WEBHOOK: "started by a webhook",
    TriggerType.AGENT: "started by another agent",
}


def access_approval(*, agency: Agency | None, id: uuid.UUID | str) -> Approval:
    """The approval with what its page shows; ``agency=None``: any agency (a superuser)."""
    approvals = Approval.objects.select_related(
        "agent", "execution", "decided_by", "risk_rule", "tool_call__tool"
    )
    return access_object(approvals, agency=agency, id=id)


def access_question(*, agency: Agency | None, id: uuid.UUID | str) -> Question:
    questions = Question.objects.select_related("agent", "execution", "responded_by", "tool_call")
    return access_object(questions, agency=agency, id=id)


@dataclass(frozen=True)
class StepLine:
    number: int
    kind: str  # observe / think / act / reflect
    text: str
    tool_name: str = ""
    arguments: str = ""
    output: str = ""
    failed: bool = False


@dataclass(frozen=True)
class RunContext:
    """What led to an item: the run's instruction or triggering event and its steps so far."""

    execution: Execution
    url: str
    started_by: str  # "started by a person", "started on its schedule", ...
    trigger_data: str  # indented JSON, "" when none
    steps: list[StepLine] = field(default_factory=list)
    earlier_steps: int = 0  # steps before the ones shown


def _json_text(value: Any, limit: int) -> str:
    if value in (None, "", {}, []):
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return clip(text, limit)


def _calls_of(step: ExecutionStep) -> str:
    """A model reply with no text, only tool calls: what it decided to call."""
    message = (step.llm_response or {}).get("message") or {}
    names = [str(call.get("name", "")) for call in message.get("tool_calls") or []]
    names = [name for name in names if name]
    return f"Decided to call {', '.join(names)}." if names else ""


def run_context(execution: Execution, *, limit: int = STEP_LIMIT) -> RunContext:
    """The run's latest ``limit`` steps, oldest first, each cut to what a person reads."""
    steps = ExecutionStep.objects.filter(execution_id=execution.id)
    total = steps.count()
    rows = list(
        steps.order_by("-step_number").only(
            "step_number", "step_type", "input_text", "reasoning", "output_text", "tool_name",
            "tool_input", "tool_output", "llm_response",
        )[:limit]
    )  # fmt: skip
    lines = []
    for row in reversed(rows):
        output = row.tool_output
        failed = isinstance(output, dict) and "error" in output
        if row.step_type == StepType.ACT:
            text = ""
        else:
            text = row.reasoning or row.output_text or row.input_text or _calls_of(row)
        lines.append(
            StepLine(
                number=row.step_number,
                kind=row.step_type,
                text=_clip_block(text, STEP_TEXT_CHARS),
                tool_name=row.tool_name,
                arguments=_json_text(row.tool_input, STEP_OUTPUT_CHARS),
                output=_json_text(output, STEP_OUTPUT_CHARS),
                failed=failed,
            )
        )
    trigger_data = execution.trigger_data
    return RunContext(
        execution=execution,
        url=reverse("admin:agents_execution_change", args=[execution.pk]),
        started_by=STARTED_BY.get(execution.trigger_type, "started"),
        trigger_data=json.dumps(trigger_data, indent=2, ensure_ascii=False, default=str)[:4000]
        if trigger_data
        else "",
        steps=lines,
        earlier_steps=max(0, total - len(rows)),
    )


def _clip_block(text: str, limit: int) -> str:
    """Text kept with its line breaks, cut at ``limit`` characters."""
    text = (text or "").strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def failed_calls_of_correction(question: Question) -> list[dict[str, Any]]:
    """A correction's failed calls, as the runtime recorded them (newest last), each with its
    arguments as indented JSON for display."""
    failures = question.context.get("failures") if isinstance(question.context, dict) else None
    rows = []
    for failure in failures if isinstance(failures, list) else []:
        if not isinstance(failure, dict):
            continue
        rows.append(
            {
                "error_code": str(failure.get("error_code") or ""),
                "error": str(failure.get("error") or ""),
                "at": _parse_iso(failure.get("at")),
                "arguments": json.dumps(
                    failure.get("arguments"), indent=2, ensure_ascii=False, default=str
                ),
            }
        )
    return rows


def _parse_iso(value: Any) -> datetime.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if timezone.is_aware(parsed) else None
