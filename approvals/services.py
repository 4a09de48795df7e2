"""Writers for approvals: a human's decision resumes or cancels the waiting run."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from agents.models import Execution, ExecutionStatus, StopReason, TransitionType
from agents.runtime import store
from agents.services import enqueue_execution
from approvals.models import Approval, ApprovalStatus
from core.exceptions import ApplicationError
from tools.models import ToolCall, ToolCallStatus
from tools.validation import validate_arguments


def approval_decide(
    *,
    approval: Approval,
    approve: bool,
    user_id: int | None,
    reason: str = "",
    edited_arguments: dict[str, Any] | None = None,
) -> Approval:
    """Approve (optionally with edited arguments) or deny a pending approval, once.

    Approved: the run becomes pending and a worker runs the call exactly once. Denied: the run
    is cancelled (seed 004: "Action denied by user"). A second decision is refused with 409, so
    a double click cannot run the tool twice. Precondition: in the approval's agency context.
    """
    with transaction.atomic():
        # The run's row first, then the approval's: the order execution_cancel takes them in
        # (it updates the run's pending approvals), or each could wait for the other.
        execution_id = Approval.objects.values_list("execution_id", flat=True).get(pk=approval.pk)
        execution = Execution.objects.select_for_update().get(pk=execution_id)
        locked = Approval.objects.select_for_update().get(pk=approval.pk)
        if locked.status != ApprovalStatus.PENDING:
            raise ApplicationError(
                "already_decided", f"This approval is already {locked.status}.", status=409
            )
        if edited_arguments is not None and locked.tool_call_id is not None:
            tool_call = ToolCall.objects.select_related("tool").get(pk=locked.tool_call_id)
            if tool_call.tool is not None:
                errors = validate_arguments(tool_call.tool.parameters_schema, edited_arguments)
                if errors:
                    raise ApplicationError(
                        "invalid_arguments",
                        "The edited arguments do not match the tool's parameters.",
                        errors=[e.to_dict() for e in errors],
                    )
        locked.status = ApprovalStatus.APPROVED if approve else ApprovalStatus.DENIED
        locked.decided_by_id = user_id
        locked.decided_at = timezone.now()
        locked.decision_reason = reason
        locked.edited_arguments = edited_arguments
        locked.save()
        if execution.status != ExecutionStatus.WAITING_APPROVAL:
            return locked
        if approve:
            store.record_transition(
                execution,
                ExecutionStatus.PENDING,
                reason=f"approved: {locked.action_type}",
                transition_type=TransitionType.NORMAL,
                triggered_by="approval_approved",
            )
            execution.save(update_fields=["status", "sequence", "updated_at"])
            enqueue_execution(execution)
        else:
            ToolCall.objects.filter(approvals=locked).update(
                status=ToolCallStatus.DENIED,
                error=reason or "Denied by an approver.",
                error_code="approval_denied",
                updated_at=timezone.now(),
            )
            store.finish_execution(
                execution,
                status=ExecutionStatus.CANCELLED,
                stop_reason=StopReason.APPROVAL_DENIED,
                error=f"Action denied by user{': ' + reason if reason else ''}",
            )
            execution.save()
        return locked
