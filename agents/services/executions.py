"""Writers for executions and triggers: start a run, cancel it, resume it after a wait."""

from __future__ import annotations

import datetime
import logging
import random
import uuid
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Model
from django.utils import timezone

from agents import lifecycle
from agents.lifecycle.states import PROVIDER_RATE_LIMIT_WAIT
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
from agents.triggers import InvalidConditions, unmet_condition, validate_conditions
from core import fastdb
from core.events import subscriptions_for
from core.models import Event
from core.sending import send_task_on_commit

logger = logging.getLogger(__name__)
WAKE_TASK = "agents.wake_execution"  # agents.tasks.wake_execution
RUN_TASK = "agents.run_execution"  # agents.tasks.run_execution
WAKE_JITTER_MS = 500


def enqueue_execution(execution: Execution, *, queue: str | None = None) -> None:
    """Deliver the run to a worker (of ``queue``, default: the default queue) once the current
    transaction commits.

    A failed send (broker down) is logged, not raised: the run is committed and stays pending,
    and beat's reaper delivers it after AGENTDESK_PENDING_REDELIVER_SECONDS. Raised, it would
    turn a started run into an error for the caller, whose retry would start it a second time.
    """
    send_task_on_commit(
        RUN_TASK,
        execution.id,
        agency_id=execution.agency_id,
        queue=queue,
        about=f"execution {execution.id}",
        then="it stays pending and the reaper delivers it later",
    )


# The run limits' count and the insert that follows are one critical section per agent: without
# it two triggers at once both count N-1 runs and both start one. A transaction-scoped advisory
# lock (released at commit) rather than the agent row's lock, which the runtime's stats UPDATE
# at the end of every run would wait for.
_LOCK_SQL = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"
# The agency and site switches and the agent's runs of the last day (both windows) in one query.
# Run after the lock: under READ COMMITTED each statement sees what committed before it began.
_STATE_SQL = (
    "SELECT (SELECT is_active FROM core_agency WHERE id = %s),"
    " (SELECT is_active FROM core_site WHERE id = %s),"
    " count(*) FILTER (WHERE created_at >= now() - interval '1 hour'), count(*)"
    " FROM agents_execution WHERE agent_id = %s AND created_at >= now() - interval '1 day'"
)


def _why_not_start(  # noqa: PLR0911 - one return per reason
    agent: Agent, *, enforce_limits: bool
) -> tuple[str, str] | None:
    """The skip reason and detail when ``agent`` may not start a run now, else ``None``.
    With ``enforce_limits``, holds the agent's run-limit lock until the transaction ends."""
    if not agent.is_active:
        return SkipReason.AGENT_INACTIVE, "the agent is not active"
    with connection.cursor() as cursor:
        if enforce_limits:
            cursor.execute(_LOCK_SQL, [f"agents.run_limits:{agent.id}"])
        cursor.execute(_STATE_SQL, [agent.agency_id, agent.site_id, agent.id])
        agency_active, site_active, last_hour, last_day = cursor.fetchone()
    # No reason of their own (the skip reasons are a CHECK constraint): agent_inactive, with
    # the detail saying which switch is off.
    if agency_active is False:
        return SkipReason.AGENT_INACTIVE, "the agency is suspended (not active)"
    if site_active is False:
        return SkipReason.AGENT_INACTIVE, "the agent's site is not active"
    if not enforce_limits:
        return None
    if last_hour >= agent.max_runs_per_hour:
        return SkipReason.RATE_LIMITED, f"max_runs_per_hour ({agent.max_runs_per_hour}) reached"
    if last_day >= agent.max_runs_per_day:
        return SkipReason.RATE_LIMITED, f"max_runs_per_day ({agent.max_runs_per_day}) reached"
    return None


def _trigger_log(
    agent: Agent,
    *,
    trigger_type: str,
    event_type: str,
    trigger_event: Event | None,
    payload: dict[str, Any],
) -> TriggerLog:
    return TriggerLog(
        agency_id=agent.agency_id,
        agent=agent,
        site_id=agent.site_id,
        trigger_type=trigger_type,
        event_type=event_type,
        event=trigger_event,
        payload=payload,
    )


def _log_skip(log: TriggerLog, reason: str, detail: str) -> None:
    log.outcome, log.skip_reason, log.skip_detail = TriggerOutcome.SKIPPED, reason, detail
    fastdb.insert(log)


@transaction.atomic(savepoint=False)  # all or nothing with the caller's transaction
def execution_create(
    *,
    agent: Agent,
    trigger_type: str = TriggerType.MANUAL,
    input: str = "",
    trigger_data: dict[str, Any] | None = None,
    trigger_event: Event | None = None,
    parent_id: uuid.UUID | None = None,
    triggered_by_id: int | None = None,
    enforce_limits: bool = True,
    queue: str | None = None,
    depth: int | None = None,
    initial_context: dict[str, Any] | None = None,
) -> Execution | None:
    """Start a run of ``agent`` and log the trigger; ``None`` (trigger logged as skipped, see
    :func:`skipped_trigger`) when the agent, its agency or its site is inactive, or the agent is
    over its run limits. ``parent_id``: the run whose event (``trigger_event``) started this
    one (:func:`event_dispatch` looks it up once per event), or the run that delegated to it
    (teams: with its ``depth`` and the limits it passes on in ``initial_context``).
    Precondition: in the agent's agency context.

    Holds the agent's run-limit lock until the caller's transaction ends: a transaction that
    starts runs of several agents must start them in agent id order (as event dispatch does),
    or two such transactions can deadlock.
    """
    log = _trigger_log(
        agent,
        trigger_type=trigger_type,
        event_type=trigger_event.event_type if trigger_event else trigger_type,
        trigger_event=trigger_event,
        payload=trigger_data or {},
    )
    skip = _why_not_start(agent, enforce_limits=enforce_limits)
    if skip is not None:
        _log_skip(log, *skip)
        return None
    execution = Execution(
        agency_id=agent.agency_id,
        agent=agent,
        site_id=agent.site_id,
        # Started by another run's event: that run's child, one deeper.
        parent_id=parent_id,
        depth=depth if depth is not None else (trigger_event.chain_depth if trigger_event else 0),
        trigger_type=trigger_type,
        trigger_event=trigger_event,
        trigger_data=trigger_data or {},
        triggered_by_id=triggered_by_id,
        input=input,
        initial_context=initial_context or {},
    )
    rows: list[Model] = []
    lifecycle.record_transition(
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


def _parent_run(event: Event) -> uuid.UUID | None:
    """The run whose event this is, if it still exists: one deleted since (with its agent)
    leaves its children without a parent, not the event without its dispatch (the foreign key
    would fail the whole dispatch at commit)."""
    source = event.source_execution_id
    if source is None:
        return None
    return Execution.objects.filter(pk=source).values_list("pk", flat=True).first()


# The unique index (migration agents 0011) that lets a cron tick start one run only.
TICK_INDEX = "agents_triggerlog_schedule_tick_uniq"


def execution_create_for_tick(agent: Agent, *, tick_id: str | None) -> Execution | None:
    """A scheduled run for one cron tick (``tick_id``: the tick message's Celery task id, which a
    re-delivered message keeps). A unique index on the trigger log admits one invoked trigger per
    agent and tick: a second delivery of the tick starts nothing and logs a ``duplicate`` skip.
    Precondition: in the agent's agency context."""
    trigger_data: dict[str, Any] = {"schedule": agent.trigger_schedule}
    if tick_id:  # None only when called directly, not through Celery
        trigger_data["tick_id"] = tick_id
    try:
        # A savepoint: on a repeated tick its writes (and the run's enqueue) are undone.
        with transaction.atomic():
            return execution_create(
                agent=agent, trigger_type=TriggerType.SCHEDULE, trigger_data=trigger_data
            )
    except IntegrityError as exc:
        if getattr(getattr(exc.__cause__, "diag", None), "constraint_name", None) != TICK_INDEX:
            raise
    first = (
        TriggerLog.objects.filter(
            agent=agent, outcome=TriggerOutcome.INVOKED, payload__contains={"tick_id": tick_id}
        )
        .values_list("execution_id", flat=True)
        .first()
    )
    logger.warning("agent %s: cron tick %s delivered again, not run twice", agent.id, tick_id)
    log = _trigger_log(
        agent,
        trigger_type=TriggerType.SCHEDULE,
        event_type=TriggerType.SCHEDULE,
        trigger_event=None,
        payload=trigger_data,
    )
    _log_skip(
        log,
        SkipReason.DUPLICATE,
        f"cron tick {tick_id} was delivered again; it started run {first}",
    )
    return None


def skipped_trigger(agent: Agent) -> TriggerLog | None:
    """The trigger log row of ``agent``'s latest skipped start: why :func:`execution_create`
    returned ``None``. Precondition: the agent's agency context."""
    return (
        TriggerLog.objects.filter(agent=agent, outcome=TriggerOutcome.SKIPPED)
        .order_by("-triggered_at")
        .first()
    )


def execution_cancel(*, execution: Execution, reason: str = "Cancelled on request.") -> Execution:
    """Cancel a run: at once when it is not running; otherwise the worker stops before its next
    model call or tool. Idempotent. Precondition: in the execution's agency context."""
    with transaction.atomic():
        if execution.parent_id is not None and execution.trigger_type == TriggerType.AGENT:
            # A delegated run's end resumes its parent: the parent's row is locked first, in
            # the order every writer of the two takes them (teams.services).
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


def schedule_wake(execution: Execution) -> None:
    """Once the current transaction commits, send the parked run a delayed message for its
    ``wait_until`` (a ``wait`` timer, a provider's rate limit), so that it resumes on time and
    not at the reaper's next tick. Only for waits up to AGENTDESK_PRECISE_WAKE_MAX_SECONDS (a
    broker holds a delayed message only so long); beat's timer check wakes the others, and any
    run whose message is lost. A failed send is logged, not raised, for the same reason."""
    until = execution.wait_until
    if until is None:
        return
    if (until - timezone.now()).total_seconds() > settings.AGENTDESK_PRECISE_WAKE_MAX_SECONDS:
        return
    # Up to half a second late: runs parked until the same instant (a rate limit's minute) do
    # not all wake, and race for the new window, at once.
    eta = until + datetime.timedelta(milliseconds=random.randint(0, WAKE_JITTER_MS))  # noqa: S311
    send_task_on_commit(
        WAKE_TASK,
        execution.id,
        agency_id=execution.agency_id,
        eta=eta,
        about=f"execution {execution.id}",
        then="beat's timer check wakes it",
    )


def execution_resume_due(execution: Execution, *, now: datetime.datetime) -> Execution:
    """Resume a ``waiting_input`` run whose timer is due by ``now``: a provider rate limit's
    window is over (no observation: nothing happened the model should hear of), or its ``wait``
    is. Everything is decided on the locked row: a due list read earlier (beat's, or a delayed
    wake-up's) may name a run resumed, and parked again for later or for another reason, since.
    Precondition: agency context."""
    with transaction.atomic():
        locked = Execution.objects.select_for_update().get(pk=execution.pk)
        if (
            locked.status != ExecutionStatus.WAITING_INPUT
            or locked.wait_until is None
            or locked.wait_until > now
        ):
            return locked
        if locked.input_request.get("kind") == PROVIDER_RATE_LIMIT_WAIT:
            return _resume(locked, observation=None, reason="provider rate limit window over")
        return _resume(
            locked,
            observation=f"The wait is over (it was set until {locked.wait_until}).",
            reason="wait timer due",
        )


def execution_resume(
    *, execution: Execution, observation: str | None, reason: str, queue: str | None = None
) -> Execution:
    """A waiting run becomes pending again, with what it waited for as a new observation (none:
    what it waited for is a tool call's result, which the resumed run reads).

    For answered questions and decisions, and the end of the run a delegating run waited for
    (a timer's end: execution_resume_due). ``queue``: where the run is delivered (default: the
    default queue). Precondition: agency context.
    """
    with transaction.atomic():
        locked = Execution.objects.select_for_update().get(pk=execution.pk)
        if locked.status not in _RESUMABLE:
            return locked
        return _resume(locked, observation=observation, reason=reason, queue=queue)


_RESUMABLE = frozenset(
    {ExecutionStatus.WAITING_INPUT, ExecutionStatus.WAITING_APPROVAL, ExecutionStatus.WAITING_AGENT}
)


def _resume(
    locked: Execution, *, observation: str | None, reason: str, queue: str | None = None
) -> Execution:
    """Make the locked waiting run pending again (its observation, if any, as a new step) and
    deliver it once the transaction commits."""
    if observation is not None:
        locked.current_step += 1
        locked.steps.create(
            agency_id=locked.agency_id,
            step_number=locked.current_step,
            step_type=StepType.OBSERVE,
            input_text=observation,
            started_at=timezone.now(),
            completed_at=timezone.now(),
        )
    lifecycle.record_transition(
        locked, ExecutionStatus.PENDING, reason=reason, transition_type=TransitionType.NORMAL
    )
    locked.wait_until = None
    locked.input_request = {}
    locked.save(
        update_fields=[
            "status", "sequence", "current_step", "wait_until", "input_request", "updated_at",
        ]
    )  # fmt: skip
    enqueue_execution(locked, queue=queue)
    return locked


def agents_subscribed(*, agency_id: uuid.UUID, event_type: str) -> list[Agent]:
    """Active or not: an inactive subscriber's trigger is logged as skipped, not ignored.
    In id order: the dispatch takes each one's run-limit lock in this order, so that two
    dispatches never wait for each other's."""
    return list(
        Agent.objects.filter(
            agency_id=agency_id, trigger_events__overlap=subscriptions_for(event_type)
        ).order_by("id")
    )


def _event_skip(agent: Agent, event: Event) -> tuple[str, str] | None:
    """Why ``event`` does not concern ``agent`` (the self-trigger and chain guards, its
    conditions)."""
    limit = settings.AGENTDESK_MAX_RUN_CHAIN_DEPTH
    if event.chain_depth > limit:
        # Agents that start each other through events (A's run emits what B subscribes to, and
        # B's what A does) would otherwise run, and spend, without end.
        return (
            SkipReason.CHAIN_TOO_DEEP,
            f"the event comes from a chain of {event.chain_depth} agent runs, each after the "
            f"first started by the previous one's event (AGENTDESK_MAX_RUN_CHAIN_DEPTH is "
            f"{limit})",
        )
    if str(event.actor_id) == str(agent.id) and event.event_type.startswith("ai."):
        # No reason of its own (CHECK constraint): a condition every agent has.
        return (
            SkipReason.CONDITIONS_NOT_MET,
            "the event is this agent's own ai.* event; an agent never triggers itself",
        )
    conditions = agent.trigger_conditions
    if not conditions:
        return None
    try:
        validate_conditions(conditions)
    except InvalidConditions as exc:  # stored before they were checked on save
        return SkipReason.ERROR, f"trigger_conditions are invalid: {exc}"
    unmet = unmet_condition(conditions, event.payload)
    return (SkipReason.CONDITIONS_NOT_MET, unmet) if unmet else None


def event_dispatch(*, event: Event) -> list[Execution]:
    """Start every agent of the event's agency subscribed to its type (logging skips).

    Idempotent: an event already processed starts nothing. Precondition: agency context.
    """
    with transaction.atomic():
        locked = Event.objects.select_for_update().get(pk=event.pk)
        if locked.processed_at is not None:
            return []
        started = []
        parent_id = _parent_run(locked)
        for agent in agents_subscribed(agency_id=locked.agency_id, event_type=locked.event_type):
            trigger_data = {"event_type": locked.event_type, "payload": locked.payload}
            skip = _event_skip(agent, locked)
            if skip is not None:
                log = _trigger_log(
                    agent,
                    trigger_type=TriggerType.EVENT,
                    event_type=locked.event_type,
                    trigger_event=locked,
                    payload=trigger_data,
                )
                _log_skip(log, *skip)
                continue
            execution = execution_create(
                agent=agent,
                trigger_type=TriggerType.EVENT,
                trigger_data=trigger_data,
                trigger_event=locked,
                parent_id=parent_id,
            )
            if execution is not None:
                started.append(execution)
        locked.processed_at = timezone.now()
        locked.save(update_fields=["processed_at", "updated_at"])
        return started
