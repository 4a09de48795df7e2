"""Writers for executions and triggers: start a run, cancel it, resume it after a wait."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import connection, transaction
from django.db.models import Model
from django.utils import timezone

from agents.models import (
    Agent,
    Execution,
    ExecutionStatus,
    SkipReason,
    StepType,
    StopReason,
    TransitionType,
    TriggerLog,
    TriggerOutcome,
    TriggerType,
)
from agents.runtime import store
from core import fastdb
from core.models import Event


def enqueue_execution(execution: Execution, *, queue: str | None = None) -> None:
    """Deliver the run to a worker (of ``queue``, default: the default queue) once the current
    transaction commits."""
    from agents.tasks import run_execution  # noqa: PLC0415 - tasks import this module

    execution_id, agency_id = str(execution.id), str(execution.agency_id)
    options = {"queue": queue} if queue else {}
    transaction.on_commit(
        lambda: run_execution.apply_async(
            args=[execution_id], kwargs={"agency_id": agency_id}, **options
        )
    )


def _runs_exceeded(agent: Agent) -> str | None:
    # One pass over the agent's runs of the last day, counting both windows.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FILTER (WHERE created_at >= now() - interval '1 hour'), count(*)"
            " FROM agents_execution WHERE agent_id = %s AND created_at >= now() - interval '1 day'",
            [agent.id],
        )
        last_hour, last_day = cursor.fetchone()
    if last_hour >= agent.max_runs_per_hour:
        return f"max_runs_per_hour ({agent.max_runs_per_hour}) reached"
    if last_day >= agent.max_runs_per_day:
        return f"max_runs_per_day ({agent.max_runs_per_day}) reached"
    return None


@transaction.atomic(savepoint=False)  # all or nothing with the caller's transaction
def execution_create(
    *,
    agent: Agent,
    trigger_type: str = TriggerType.MANUAL,
    input: str = "",
    trigger_data: dict[str, Any] | None = None,
    trigger_event: Event | None = None,
    triggered_by_id: int | None = None,
    enforce_limits: bool = True,
    queue: str | None = None,
) -> Execution | None:
    """Start a run of ``agent`` and log the trigger; ``None`` (trigger logged as skipped) when
    the agent is inactive or over its run limits. Precondition: in the agent's agency context.
    """
    event_type = trigger_event.event_type if trigger_event else trigger_type
    skip: tuple[str, str] | None = None
    if not agent.is_active:
        skip = (SkipReason.AGENT_INACTIVE, "the agent is not active")
    elif enforce_limits and (limit := _runs_exceeded(agent)):
        skip = (SkipReason.RATE_LIMITED, limit)
    log = TriggerLog(
        agency_id=agent.agency_id,
        agent=agent,
        site_id=agent.site_id,
        trigger_type=trigger_type,
        event_type=event_type,
        event=trigger_event,
        payload=trigger_data or {},
    )
    if skip is not None:
        log.outcome, log.skip_reason, log.skip_detail = TriggerOutcome.SKIPPED, *skip
        fastdb.insert(log)
        return None
    execution = Execution(
        agency_id=agent.agency_id,
        agent=agent,
        site_id=agent.site_id,
        trigger_type=trigger_type,
        trigger_event=trigger_event,
        trigger_data=trigger_data or {},
        triggered_by_id=triggered_by_id,
        input=input,
    )
    rows: list[Model] = []
    store.record_transition(
        execution,
        ExecutionStatus.PENDING,
        reason=f"{trigger_type} trigger",
        created=True,
        collect=rows,
    )
    log.outcome, log.execution = TriggerOutcome.INVOKED, execution
    fastdb.insert_together(execution, *rows, log)  # one round trip
    enqueue_execution(execution, queue=queue)
    return execution


def execution_cancel(*, execution: Execution, reason: str = "Cancelled on request.") -> Execution:
    """Cancel a run: at once when it is not running; otherwise the worker stops before its next
    model call or tool. Idempotent. Precondition: in the execution's agency context."""
    with transaction.atomic():
        locked = Execution.objects.select_for_update().get(pk=execution.pk)
        if locked.is_terminal:
            return locked
        locked.cancel_requested_at = locked.cancel_requested_at or timezone.now()
        if locked.status == ExecutionStatus.RUNNING and locked.lease_owner:
            locked.save(update_fields=["cancel_requested_at", "updated_at"])
            return locked
        # Pending, waiting, or running without an owner (its worker died): nobody would see a
        # request, so the run ends here.
        from tools.models import ToolCall, ToolCallStatus  # noqa: PLC0415

        ToolCall.objects.filter(execution=locked, status=ToolCallStatus.WAITING_APPROVAL).update(
            status=ToolCallStatus.CANCELLED, updated_at=timezone.now()
        )
        from approvals.models import Approval, ApprovalStatus  # noqa: PLC0415

        Approval.objects.filter(execution=locked, status=ApprovalStatus.PENDING).update(
            status=ApprovalStatus.CANCELLED, updated_at=timezone.now()
        )
        store.finish_execution(
            locked, status=ExecutionStatus.CANCELLED, stop_reason=StopReason.CANCELLED, error=reason
        )
        locked.save()
        return locked


def execution_resume(*, execution: Execution, observation: str, reason: str) -> Execution:
    """A waiting run becomes pending again, with what it waited for as a new observation.

    Used by the ``wait`` timer (and answered questions). Precondition: agency context.
    """
    with transaction.atomic():
        locked = Execution.objects.select_for_update().get(pk=execution.pk)
        if locked.status not in (ExecutionStatus.WAITING_INPUT, ExecutionStatus.WAITING_APPROVAL):
            return locked
        locked.current_step += 1
        locked.steps.create(
            agency_id=locked.agency_id,
            step_number=locked.current_step,
            step_type=StepType.OBSERVE,
            input_text=observation,
            started_at=timezone.now(),
            completed_at=timezone.now(),
        )
        store.record_transition(
            locked, ExecutionStatus.PENDING, reason=reason, transition_type=TransitionType.NORMAL
        )
        locked.wait_until = None
        locked.input_request = {}
        locked.save(
            update_fields=[
                "status", "sequence", "current_step", "wait_until", "input_request", "updated_at",
            ]
        )  # fmt: skip
        enqueue_execution(locked)
        return locked


def agents_subscribed(*, agency_id: uuid.UUID, event_type: str) -> list[Agent]:
    """Active or not: an inactive subscriber's trigger is logged as skipped, not ignored."""
    return list(Agent.objects.filter(agency_id=agency_id, trigger_events__contains=[event_type]))


def event_dispatch(*, event: Event) -> list[Execution]:
    """Start every agent of the event's agency subscribed to its type (logging skips).

    Idempotent: an event already processed starts nothing. Precondition: agency context.
    """
    with transaction.atomic():
        locked = Event.objects.select_for_update().get(pk=event.pk)
        if locked.processed_at is not None:
            return []
        started = []
        for agent in agents_subscribed(agency_id=locked.agency_id, event_type=locked.event_type):
            if str(locked.actor_id) == str(agent.id) and locked.event_type.startswith("ai."):
                continue  # an agent's own lifecycle events never re-trigger it
            execution = execution_create(
                agent=agent,
                trigger_type=TriggerType.EVENT,
                trigger_data={"event_type": locked.event_type, "payload": locked.payload},
                trigger_event=locked,
            )
            if execution is not None:
                started.append(execution)
        locked.processed_at = timezone.now()
        locked.save(update_fields=["processed_at", "updated_at"])
        return started
