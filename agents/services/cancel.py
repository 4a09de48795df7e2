"""Cancelling a run: at once when no worker holds it, else at the worker's next check."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from agents import lifecycle
from agents.models import Execution, ExecutionStatus, StopReason, TriggerType


def execution_cancel(*, execution: Execution, reason: str = "Cancelled on request.") -> Execution:
    """Cancel a run: at once when it is not running; otherwise the worker stops before its next
    model call or tool. Idempotent. Precondition: in the execution's agency context."""
    with transaction.atomic():
        if execution.parent_id is not None and execution.trigger_type == TriggerType.AGENT:
            # A delegated run's end resumes its parent: the parent's row is locked first, in
            # the order every writer of the two takes them (teams.services.ending).
            list(
                Execution.objects.select_for_update()
                .filter(pk=execution.parent_id)
                .values_list("pk", flat=True)
            )
        locked = Execution.objects.select_for_update().get(pk=execution.pk)
        if locked.is_terminal:
            return locked
        now = timezone.now()
        locked.cancel_requested_at = locked.cancel_requested_at or now
        if (
            locked.status == ExecutionStatus.RUNNING
            and locked.lease_owner
            and locked.lease_expires_at is not None
            and locked.lease_expires_at > now
        ):
            locked.save(update_fields=["cancel_requested_at", "updated_at"])
            return locked
        # Pending, waiting, or running without a live owner (its worker died, or its lease ran
        # out and the reaper has not come by yet): nobody would see a request, so the run ends
        # here (its pending decisions are cancelled with it: approvals' run-ended listener). A
        # stalled worker that wakes up finds its lease gone and writes nothing.
        lifecycle.finish_execution(
            locked, status=ExecutionStatus.CANCELLED, stop_reason=StopReason.CANCELLED, error=reason
        )
        locked.save()
        return locked
