"""What approvals and questions share: both hold a run that waits for a person."""

from __future__ import annotations

from agents import lifecycle
from agents.models import Execution, ExecutionStatus
from approvals.models import Approval, Question


def lock_with_run[Item: (Approval, Question)](item: Item) -> tuple[Execution, Item]:
    """The run's row, then the item's, both locked: the order the runtime takes them in too, so
    a decision racing the run (or another decision) waits instead of deadlocking."""
    model = type(item)
    execution_id = model.objects.values_list("execution_id", flat=True).get(pk=item.pk)
    execution = Execution.objects.select_for_update().get(pk=execution_id)
    return execution, model.objects.select_for_update().get(pk=item.pk)


def end_waiting_run(execution: Execution, *, waiting: str, stop_reason: str, error: str) -> None:
    """Nobody answered in time: the run ends ``timed_out`` if it still waits (``waiting``: its
    waiting status); a run that has moved on meanwhile is left alone. Precondition: the run's
    row locked (:func:`lock_with_run`)."""
    if execution.status != waiting:
        return
    lifecycle.finish_execution(
        execution, status=ExecutionStatus.TIMED_OUT, stop_reason=stop_reason, error=error
    )
    execution.save()
