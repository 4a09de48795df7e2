"""Writers for approvals: a human's decision resumes (or ends) the waiting run; an approval
nobody decides in time expires.

Every writer takes the run's row lock first and then the approval's, the order
``execution_cancel`` takes them in (it updates the run's pending approvals): taken the other
way round, two of them could wait for each other.
"""

from __future__ import annotations

import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents import lifecycle
from agents.models import Agent, DecisionPoint, ExecutionStatus, StopReason, TransitionType
from agents.services import enqueue_execution
from approvals import notify
from approvals.edits import approval_check_edit
from approvals.models import Approval, ApprovalStatus
from approvals.waiting import end_waiting_run, lock_with_run
from core.events import event_emit
from core.exceptions import ApplicationError
from core.models import ActorType
from flow import decisions
from ops import metrics
from tools.models import ToolCall, ToolCallStatus

REASON_MAX_CHARS = 2000


def expiry_for(agent: Agent, *, now: datetime.datetime | None = None) -> datetime.datetime:
    """When a request for a person made now expires (the agent's ``human_timeout_minutes``)."""
    return (now or timezone.now()) + datetime.timedelta(minutes=agent.human_timeout_minutes)


def _already(locked: Approval) -> ApplicationError:
    who = f" by {locked.decided_by}" if locked.decided_by_id else ""
    return ApplicationError(
        "already_decided",
        f"This approval is already {locked.status}{who}.",
        status=409,
        current_status=locked.status,
    )


def approval_decide(
    *,
    approval: Approval,
    approve: bool,
    user_id: int | None,
    reason: str = "",
    edited_arguments: dict[str, Any] | None = None,
    continue_run: bool = False,
) -> Approval:
    """Approve (optionally with edited arguments) or deny a pending approval, once.

    Approved: the run becomes pending and a worker runs the call exactly once, after checking
    again that it may (tools.executor). Denied (a reason is required): the run is cancelled
    (seed 004: "Action denied by user"), or, with ``continue_run`` where the agent allows it,
    resumed with the refusal as the call's result (a cancelled run gets the person's decision
    point here; a resumed one records it itself). A second decision is refused with 409, so a
    double click or two approvers cannot run the tool twice; an invalid edit decides nothing.
    Precondition: in the approval's agency context.
    """
    reason = reason.strip()
    if not approve and not reason:
        raise ApplicationError("reason_required", "Say why the action is denied.")
    if len(reason) > REASON_MAX_CHARS:
        raise ApplicationError("reason_too_long", f"At most {REASON_MAX_CHARS} characters.")
    if approve and continue_run:
        raise ApplicationError("continue_not_allowed", "Only a deny chooses how the run goes on.")
    with transaction.atomic():
        execution, locked = lock_with_run(approval)
        if locked.status != ApprovalStatus.PENDING:
            raise _already(locked)
        if (
            continue_run
            and not Agent.objects.filter(pk=locked.agent_id, deny_may_continue=True).exists()
        ):
            raise ApplicationError(
                "continue_not_allowed",
                "This agent's runs end when an action is denied (its deny_may_continue "
                "setting is off).",
            )
        if edited_arguments is not None:
            approval_check_edit(approval=locked, arguments=edited_arguments)
        locked.status = ApprovalStatus.APPROVED if approve else ApprovalStatus.DENIED
        locked.decided_by_id = user_id
        locked.decided_at = timezone.now()
        locked.decision_reason = reason
        locked.edited_arguments = edited_arguments
        locked.save()
        metrics.approval_resolved(locked.status)
        _emit(locked, "ai.approval.resolved", user_id=user_id, continue_run=continue_run)
        if execution.status != ExecutionStatus.WAITING_APPROVAL:
            return locked
        if approve or continue_run:
            # Denied and continued: the resumed run finds the call denied and tells the model.
            verb = "approved" if approve else "denied, run continues"
            lifecycle.record_transition(
                execution,
                ExecutionStatus.PENDING,
                reason=f"{verb}: {locked.action_type}",
                transition_type=TransitionType.NORMAL,
                triggered_by="approval_approved" if approve else "approval_denied",
            )
            execution.save(update_fields=["status", "sequence", "updated_at"])
            enqueue_execution(execution)
        else:
            ToolCall.objects.filter(approvals=locked).update(
                status=ToolCallStatus.DENIED,
                error=reason,
                error_code="approval_denied",
                updated_at=timezone.now(),
            )
            if settings.AGENTDESK_FLOW_DECISION_POINTS:
                # The person's decision point: no resumed run records it (flow/runtime.py does
                # when the run goes on).
                DecisionPoint.objects.create(
                    agency_id=locked.agency_id,
                    execution_id=execution.id,
                    decided_at=locked.decided_at,
                    **decisions.approval_decided(
                        tool_name=locked.action_type,
                        approval_id=locked.id,
                        status=locked.status,
                        reason=reason,
                        edited=edited_arguments is not None,
                        decided_by=user_id,
                    ),
                )
            lifecycle.finish_execution(
                execution,
                status=ExecutionStatus.CANCELLED,
                stop_reason=StopReason.APPROVAL_DENIED,
                error=f"Action denied by user: {reason}",
            )
            execution.save()
        return locked


def approval_expire(approval: Approval, *, now: datetime.datetime) -> bool:
    """Expire ``approval`` if it is still pending past its ``expires_at``: the action never runs
    and the run ends ``approval_expired``. ``False`` when a decision came first (decided on the
    locked rows). Precondition: in the approval's agency context."""
    with transaction.atomic():
        execution, locked = lock_with_run(approval)
        if (
            locked.status != ApprovalStatus.PENDING
            or locked.expires_at is None
            or locked.expires_at > now
        ):
            return False
        locked.status = ApprovalStatus.EXPIRED
        locked.save(update_fields=["status", "updated_at"])
        metrics.approval_resolved(locked.status)
        message = (
            f"Nobody decided in time: the approval of {locked.action_type} expired at "
            f"{locked.expires_at:%Y-%m-%d %H:%M} UTC; the action was not run."
        )
        ToolCall.objects.filter(approvals=locked).update(
            status=ToolCallStatus.CANCELLED,
            error=message,
            error_code="approval_expired",
            completed_at=now,
            updated_at=now,
        )
        _emit(locked, "ai.approval.expired", user_id=None)
        end_waiting_run(
            execution,
            waiting=ExecutionStatus.WAITING_APPROVAL,
            stop_reason=StopReason.APPROVAL_EXPIRED,
            error=message,
        )
        return True


def approval_requested(approval: Approval) -> None:
    """A new approval (written by tools.executor in the run's transaction): the event agents can
    subscribe to, and the approvers' notifications once it commits."""
    _emit(approval, "ai.approval.requested", user_id=None, by_agent=True)
    metrics.approval_requested(approval.risk_level)
    notify.approval_requested_on_commit(approval)


def _emit(
    approval: Approval,
    event_type: str,
    *,
    user_id: int | None,
    by_agent: bool = False,
    **extra: Any,
) -> None:
    payload: dict[str, Any] = {
        "approval_id": str(approval.id),
        "execution_id": str(approval.execution_id),
        "agent_id": str(approval.agent_id),
        "action_type": approval.action_type,
        "risk_level": approval.risk_level,
        "status": approval.status,
    }
    if approval.status in (ApprovalStatus.APPROVED, ApprovalStatus.DENIED):
        payload["decided_by"] = user_id
        payload["reason"] = approval.decision_reason
        payload["edited"] = approval.edited_arguments is not None
        payload.update(extra)
    event_emit(
        agency_id=approval.agency_id,
        site_id=approval.site_id,
        event_type=event_type,
        payload=payload,
        source_module="approvals",
        source_entity_type="approval",
        source_entity_id=str(approval.id),
        # The agent's own request: an agent is never started by its own ai.* events.
        actor_type=ActorType.AGENT
        if by_agent
        else (ActorType.USER if user_id else ActorType.SYSTEM),
        actor_user_id=user_id,
        actor_id=str(approval.agent_id) if by_agent else "",
    )
