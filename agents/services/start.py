"""Starting a run: the trigger logged (invoked, or skipped with its reason: the agent, its agency
or its site inactive, the agent over its run limits, a cron tick delivered again), the run
created pending and delivered to a worker once the transaction commits."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Model

from agents import lifecycle
from agents.models import (
    Agent,
    Execution,
    ExecutionPurpose,
    ExecutionStatus,
    SkipReason,
    TriggerLog,
    TriggerOutcome,
    TriggerType,
)
from core import fastdb
from core.models import Event
from core.sending import send_task_on_commit

logger = logging.getLogger(__name__)
RUN_TASK = "agents.run_execution"  # agents.tasks.run_execution


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


def trigger_log(
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


def log_skip(log: TriggerLog, reason: str, detail: str) -> None:
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
    purpose: str = ExecutionPurpose.RUN,
    agent_version_id: uuid.UUID | None = None,
) -> Execution | None:
    """Start a run of ``agent`` and log the trigger; ``None`` (trigger logged as skipped, see
    :func:`skipped_trigger`) when the agent, its agency or its site is inactive, or the agent is
    over its run limits. ``parent_id``: the run whose event (``trigger_event``) started this
    one (:func:`event_dispatch` looks it up once per event), or the run that delegated to it
    (teams: with its ``depth`` and the limits it passes on in ``initial_context``).
    ``purpose``: what the run is for (:class:`~agents.models.ExecutionPurpose`: an experiment's
    runs are "evaluation" runs, which the agent's stats, memory and learning leave out).
    ``agent_version_id``: the version of the agent the run starts on (one of its versions);
    by default the one a run plugin's ``version`` hook names when the run is first claimed (a
    canary's), else the agent's current version then.
    Precondition: in the agent's agency context.

    Holds the agent's run-limit lock until the caller's transaction ends: a transaction that
    starts runs of several agents must start them in agent id order (as event dispatch does),
    or two such transactions can deadlock.
    """
    log = trigger_log(
        agent,
        trigger_type=trigger_type,
        event_type=trigger_event.event_type if trigger_event else trigger_type,
        trigger_event=trigger_event,
        payload=trigger_data or {},
    )
    skip = _why_not_start(agent, enforce_limits=enforce_limits)
    if skip is not None:
        log_skip(log, *skip)
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
        purpose=purpose,
        agent_version_id=agent_version_id,
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
    log = trigger_log(
        agent,
        trigger_type=TriggerType.SCHEDULE,
        event_type=TriggerType.SCHEDULE,
        trigger_event=None,
        payload=trigger_data,
    )
    log_skip(
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
