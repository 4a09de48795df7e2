"""Investigations (seed 000): when a tool's result looks wrong for the task — it returned nothing
(an empty result or list), or an error saying what the task is about does not exist — a run of an
agent with ``investigation_max_steps`` > 0 is told to investigate before answering, and granted
that many model calls beyond ``max_steps_per_run`` (at most :data:`MAX_GRANTED`, once per run).

Memory's run plugin looks at each tool result (memory/run_plugin.py, ``tool_result``); the
grant is written with the step (the run's snapshot's ``max_steps_per_run``, so a resumed run
keeps it) together with an :class:`Investigation` row. After the run, ``memory.after_run``
closes it (:func:`investigations_finish`): the steps used, the model's text in them (its
findings) and the outcome.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from agents.models import Execution, ExecutionStatus, ExecutionStep, StepType
from memory.learning.models import Investigation, InvestigationOutcome

# What a result looks like is the tools app's (flow's loop detection judges it alike); memory's
# run plugin reads it here.
from tools.results import NOTE_KEY, looks_wrong  # noqa: F401

MAX_GRANTED = 10  # extra steps one run may be granted, whatever the agent says
FINDINGS_CHARS = 4000
RESULT_CHARS = 2000


def note(trigger: str, granted: int) -> str:
    what = (
        "returned nothing" if trigger == "empty_result" else "says what you look for is not there"
    )
    return (
        f"This result looks wrong for your task: the tool {what}. Before you answer, investigate "
        "why: check the arguments you gave (spelling, ids, filters), try a broader or different "
        f"query or another tool. You have up to {granted} extra steps for it; then answer with "
        "what you found, and say so if the thing really does not exist."
    )


def clipped(output: dict[str, Any]) -> dict[str, Any]:
    import json  # noqa: PLC0415 - only for an investigation

    text = json.dumps(output, default=str)
    return output if len(text) <= RESULT_CHARS else {"clipped": text[:RESULT_CHARS]}


def investigations_finish(execution: Execution) -> int:
    """Close the finished run's open investigations: the model calls made after each began
    (at most those granted), the model's text in them and what the run came to.
    Precondition: the run's agency context."""
    opened = list(Investigation.objects.filter(execution_id=execution.pk, finished_at__isnull=True))
    for investigation in opened:
        thinks = list(
            ExecutionStep.objects.filter(
                execution_id=execution.pk,
                step_type=StepType.THINK,
                step_number__gt=investigation.started_at_step,
            )
            .order_by("step_number")
            .values_list("reasoning", "output_text", "llm_response")[
                : investigation.steps_granted + 1
            ]
        )
        texts: list[str] = []
        for reasoning, answer, response in thinks:
            text = (reasoning or answer or "").strip()
            calls = [
                c.get("name", "")
                for c in (((response or {}).get("message") or {}).get("tool_calls") or [])
                if isinstance(c, dict)
            ]
            if calls:
                text = f"{text} [called {', '.join(calls)}]".strip()
            if text:
                texts.append(text)
        investigation.steps_used = min(len(thinks), investigation.steps_granted)
        investigation.findings = "\n\n".join(texts)[:FINDINGS_CHARS]
        investigation.outcome = (
            InvestigationOutcome.RESOLVED
            if execution.status == ExecutionStatus.COMPLETED
            else InvestigationOutcome.UNRESOLVED
        )
        investigation.finished_at = timezone.now()
        investigation.save(
            update_fields=["steps_used", "findings", "outcome", "finished_at", "updated_at"]
        )
    return len(opened)
