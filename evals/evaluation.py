"""What an experiment's run is and did: the mark that says which experiment, result and case a
run is for (its ``initial_context["evaluation"]``, set by evals.services.experiments with the
run's ``purpose`` "evaluation", which the lifecycle and memory read), and the facts of a run
its case's expectations are checked against (evals/expectations.py)."""

from __future__ import annotations

from typing import Any

from agents.models import Execution
from evals.expectations import Call, RunFacts
from evals.tool_gate import UNRECORDED
from tools.models import ToolCall, ToolCallStatus

MARK = "evaluation"


def mark_of(initial_context: dict[str, Any] | None) -> dict[str, Any] | None:
    """The run's experiment mark (``experiment_id``, ``result_id``, ``case_id``,
    ``agent_version_id``), or None for any other run."""
    mark = (initial_context or {}).get(MARK)
    return mark if isinstance(mark, dict) else None


def run_facts(execution: Execution) -> tuple[RunFacts, int]:
    """The run's facts and how many of its calls were unrecorded. Precondition: in its agency
    context."""
    rows = list(ToolCall.objects.filter(execution=execution).order_by("created_at", "id"))
    calls = [
        Call(
            tool=row.tool_name,
            arguments=row.input or {},
            answered=row.status == ToolCallStatus.COMPLETED,
        )
        for row in rows
    ]
    unrecorded = sum(1 for row in rows if row.error_code == UNRECORDED)
    facts = RunFacts(
        status=execution.status,
        output=execution.output or "",
        # Model calls, as max_steps_per_run counts them.
        steps=execution.llm_call_count,
        cost_usd=execution.cost_usd,
        calls=calls,
    )
    return facts, unrecorded
