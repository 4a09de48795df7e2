"""A test case saved from a run ("Save as a test case" on the run page and over the API): the
run's input, trigger payload and the conversation it continued, its tool calls with their
recorded results (what an experiment answers calls with), and first expectations staff can then
edit: the tools it called and the status it ended in."""

from __future__ import annotations

from typing import Any

from agents.models import Execution
from core.exceptions import ApplicationError
from evals.models import Dataset, DatasetVersion
from evals.services.datasets import CaseData, dataset_case_add
from tools.models import ToolCall, ToolCallStatus

# Calls that got a result the model saw (a call still waiting, or cancelled, had none).
SETTLED = (ToolCallStatus.COMPLETED, ToolCallStatus.FAILED, ToolCallStatus.DENIED)


def case_from_execution(execution: Execution, *, name: str = "") -> CaseData:
    """The case a run makes. Precondition: in the run's agency context; the run has ended."""
    calls = list(
        ToolCall.objects.filter(execution=execution, status__in=SETTLED)
        .order_by("created_at", "id")
        .values("tool_name", "input", "output", "status")
    )
    recorded: list[dict[str, Any]] = [
        {
            "tool": c["tool_name"],
            "arguments": c["input"] or {},
            "output": c["output"] or {},
            "status": c["status"],
        }
        for c in calls
    ]
    answered = [c["tool"] for c in recorded if c["status"] == ToolCallStatus.COMPLETED]
    snapshot = execution.config_snapshot or {}
    return {
        "name": (name or execution.input or f"Run {execution.pk}").strip()[:200],
        "input": execution.input,
        "trigger_type": execution.trigger_type,
        "trigger_payload": execution.trigger_data or {},
        "conversation": list(snapshot.get("conversation") or []),
        "recorded_calls": recorded,
        "expectations": {
            "must_call": list(dict.fromkeys(answered)),
            "final_status": execution.status,
        },
        "source_execution_id": str(execution.pk),
    }


def case_save_from_execution(
    *, execution: Execution, dataset: Dataset, name: str = "", user_id: int | None
) -> DatasetVersion:
    """Add the case ``execution`` makes to ``dataset`` (a new version). Refused (400, nothing
    written) for a run that has not ended, or a dataset of another agent.
    Precondition: in the agency context of both."""
    if not execution.is_terminal:
        raise ApplicationError(
            "not_ended",
            f"Run {execution.pk} is {execution.status}: save it as a test case once it ended.",
            status=409,
        )
    if dataset.agency_id != execution.agency_id:
        raise ApplicationError("no_such_dataset", "No such dataset.", status=404)
    if dataset.agent_id is not None and dataset.agent_id != execution.agent_id:
        raise ApplicationError(
            "other_agent",
            f"Dataset {dataset.name!r} holds another agent's test cases.",
            status=422,
        )
    return dataset_case_add(
        dataset=dataset, case=case_from_execution(execution, name=name), user_id=user_id
    )
