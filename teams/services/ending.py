"""A run's end, for delegation: a run that did not complete cancels the runs it delegated to
(the cancel cascade), and a delegated run answers the run that waits for it (its "parent") and
resumes it.

Locks: the parent's row before the child's (the wait's expiry and a cancel of the parent lock the
parent, then each child), and never the other way round. A child's end is often decided by
someone who holds the child's row already (an approval's deny or expiry, a question's stop, stuck
detection), so it takes no lock on its parent and writes nothing that points at it (a row with a
foreign key to the parent would lock it too, at commit): it queues ``teams.resume_parent``, which
locks the parent alone, records the answer and resumes the parent if it still waits for this
child. A parent that parks locks its own row first and then reads its child's status, so a child
that ended before the park commits is seen by one or the other. The one exception is the cancel
cascade: the transaction that ends the parent holds its row, and records its children's answers
at once.
"""

from __future__ import annotations

import contextlib
import contextvars
import uuid
from collections.abc import Iterator
from typing import Any

from django.db import transaction
from django.utils import timezone

from agents.models import (
    TERMINAL_STATUSES,
    AgentMessage,
    Execution,
    ExecutionStatus,
    MessageChannel,
    MessageType,
    TriggerType,
)
from agents.services import execution_cancel, execution_resume
from core.sending import send_task_on_commit
from teams.services.delegate import child_answer

RESUME_TASK = "teams.resume_parent"  # a delegated run's end, resuming the run waiting for it

# Runs being ended right now by this thread: their children's ends must not resume them.
_ending: contextvars.ContextVar[frozenset[uuid.UUID]] = contextvars.ContextVar(
    "teams_ending", default=frozenset()
)


def run_ended(execution: Execution) -> None:
    """Called as a run ends (by teams.run_ended, a run-ended listener: in the transaction that
    ends it, the row's new status set but not yet written). A run that did not complete cancels
    the runs it delegated to that still go on; a delegated run answers its parent (see
    :func:`_answer_parent`).
    """
    if execution.status != ExecutionStatus.COMPLETED:
        cancel_children(execution)
    delegation = (execution.initial_context or {}).get("delegation")
    if delegation and execution.parent_id is not None:
        _answer_parent(execution, delegation)


@contextlib.contextmanager
def _parent_ending(execution_id: uuid.UUID) -> Iterator[None]:
    token = _ending.set(_ending.get() | {execution_id})
    try:
        yield
    finally:
        _ending.reset(token)


def cancel_children(execution: Execution) -> int:
    """Cancel the delegated runs of ``execution`` that have not ended (each cancels its own in
    turn): those waiting or pending end now, a running one at its next step. Precondition: the
    transaction that ends ``execution`` (execution_cancel locks its row before each child's)."""
    children = list(
        Execution.objects.filter(parent_id=execution.id, trigger_type=TriggerType.AGENT)
        .exclude(status__in=TERMINAL_STATUSES)
        .order_by("created_at")
    )
    with _parent_ending(execution.id):
        for child in children:
            execution_cancel(
                execution=child,
                reason=f"The run that delegated to it ended ({execution.status}).",
            )
    return len(children)


def _answer_parent(child: Execution, delegation: dict[str, Any]) -> None:
    """The delegated run's end, in its transaction, which may hold the child's row already:
    nothing here locks or points at the parent (see the module's docstring on locks). The answer
    is recorded, and the parent resumed, by ``teams.resume_parent`` once this commits; unless
    the parent is being ended by this very transaction (the cancel cascade), which holds its row:
    then the answer is recorded now and nothing resumes."""
    if child.parent_id in _ending.get():
        parent = Execution.objects.filter(pk=child.parent_id).first()
        _record_answer(child, delegation, parent=parent)
        return
    _send_resume(child.id, agency_id=child.agency_id, queue=delegation.get("queue"))


def _send_resume(child_id: uuid.UUID, *, agency_id: uuid.UUID, queue: str | None) -> None:
    """Once the transaction commits, ``teams.resume_parent`` for the ended child, on the queue
    its parent runs on. A failed send is logged: the parent then waits until its deadline."""
    send_task_on_commit(
        RESUME_TASK,
        child_id,
        agency_id=agency_id,
        queue=queue,
        about=f"execution {child_id}",
        then="its parent waits until its deadline",
    )


def parent_resume(*, child: Execution) -> bool:
    """The ended delegated run ``child`` answers its parent: the result message (once), and the
    parent resumed if it still waits for this child (decided on the parent's locked row, so
    exactly once however many deliveries race). Locks the parent's row only. True if it resumed
    the parent. Precondition: agency context, ``child`` ended and committed."""
    delegation = (child.initial_context or {}).get("delegation")
    if not delegation or child.parent_id is None or child.status not in TERMINAL_STATUSES:
        return False
    with transaction.atomic():
        parent = Execution.objects.select_for_update().filter(pk=child.parent_id).first()
        _record_answer(child, delegation, parent=parent)
        if (
            parent is None
            or parent.status != ExecutionStatus.WAITING_AGENT
            or (parent.input_request or {}).get("execution_id") != str(child.id)
        ):
            return False  # it ended or moved on: nothing waits for this result
        slug = child.agent.slug if child.agent_id else "delegated"
        execution_resume(
            execution=parent,
            observation=None,
            reason=f"the {slug} agent's run ended ({child.status})",
            queue=delegation.get("queue"),
        )
        return True


def park_check(parent: Execution, child_id: uuid.UUID) -> None:
    """``parent`` parks to wait for ``child_id``: a child that ended before the park commits
    (its resume found the parent still running) would never resume it, so the parent's row is
    locked first, and then the child's status read; an ended child gets its resume queued again
    (it runs after the park commits). Precondition: the parent's step transaction."""
    list(Execution.objects.select_for_update().filter(pk=parent.id).values_list("pk", flat=True))
    # A statement of its own, after the lock: it sees every child's end committed before it.
    child = Execution.objects.filter(pk=child_id).values_list("status", "initial_context").first()
    if child is None or child[0] not in TERMINAL_STATUSES:
        return
    delegation = (child[1] or {}).get("delegation") or {}
    _send_resume(child_id, agency_id=parent.agency_id, queue=delegation.get("queue"))


def _record_answer(
    child: Execution, delegation: dict[str, Any], *, parent: Execution | None
) -> None:
    """The child's result message to its parent, once; the request marked responded.
    Precondition: the parent's row locked by this transaction (the message points at it)."""
    if AgentMessage.objects.filter(from_execution=child, is_request=False).exists():
        return
    now = timezone.now()
    request_message = str(delegation.get("request_message_id") or "")
    request = AgentMessage.objects.filter(pk=request_message).first() if request_message else None
    completed = child.status == ExecutionStatus.COMPLETED
    AgentMessage.objects.create(
        agency_id=child.agency_id,
        from_execution=child,
        to_execution=parent,
        from_agent_id=child.agent_id,
        to_agent_id=parent.agent_id if parent else delegation.get("parent_agent_id"),
        message_type=MessageType.RESULT if completed else MessageType.ERROR_NOTIFICATION,
        content={
            "status": child.status,
            "stop_reason": child.stop_reason,
            **child_answer(child),
            "error": child.error[:4000],
            "cost_usd": str(child.cost_usd),
            "steps": child.llm_call_count,
        },
        is_request=False,
        request_id=request.request_id if request else delegation.get("request_id"),
        in_response_to=request,
        channel=MessageChannel.TASK_QUEUE,
        sent_at=child.completed_at or now,
        received_at=now if parent is not None else None,
    )
    if request is not None:
        request.received_at = request.received_at or child.started_at
        request.responded_at = now
        request.save(update_fields=["received_at", "responded_at", "updated_at"])
