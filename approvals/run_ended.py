"""Approvals' run-ended listener (AGENTDESK_RUN_ENDED_LISTENERS, agents/lifecycle/listeners.py)."""

from __future__ import annotations

from django.utils import timezone

from agents.lifecycle import RunEnded
from approvals.models import Approval, ApprovalStatus, Question, QuestionStatus
from tools.models import ToolCall, ToolCallStatus


def cancel_pending_decisions(ended: RunEnded) -> None:
    """A run that ends while it waits for a person: its waiting tool calls, approval requests
    and questions are cancelled with it, so the inbox shows nothing left to decide. A run its
    own worker ends in a step has none (it would have parked): no query then. First in the
    list: the run's episode records its calls as they end."""
    if ended.by_worker:
        return
    execution_id = ended.execution.id
    now = timezone.now()
    ToolCall.objects.filter(
        execution_id=execution_id,
        status__in=[ToolCallStatus.WAITING_APPROVAL, ToolCallStatus.WAITING_INPUT],
    ).update(
        status=ToolCallStatus.CANCELLED,
        error="The run ended before this call ran.",
        error_code="run_ended",
        updated_at=now,
    )
    Approval.objects.filter(execution_id=execution_id, status=ApprovalStatus.PENDING).update(
        status=ApprovalStatus.CANCELLED, updated_at=now
    )
    Question.objects.filter(execution_id=execution_id, status=QuestionStatus.PENDING).update(
        status=QuestionStatus.CANCELLED, resolution_action="run ended first", updated_at=now
    )
