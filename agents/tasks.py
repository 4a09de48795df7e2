"""Celery tasks of the runtime: thin wrappers that take ids and call the runtime or services."""

from __future__ import annotations

import datetime
import logging
import uuid
from typing import Any

from celery import Task, shared_task
from django.conf import settings
from django.db.models import CharField, Exists, F, Func, OuterRef, Q, Value
from django.db.models.functions import Now
from django.utils import timezone

from agents import after_run, worker_drain
from agents.models import Agent, Execution, ExecutionStatus
from agents.runtime import drain
from agents.runtime.loop import run_execution as run_loop
from agents.schedules import remove_orphaned_schedule
from agents.services import event_dispatch, execution_create_for_tick, execution_resume_due
from core import database, tenancy
from core.events import send_dispatch
from core.models import Event
from core.tenancy import TenantTask
from ops import broker, heartbeat, metrics
from ops.models import WorkerHeartbeat

logger = logging.getLogger(__name__)
# Rows of each kind the reaper handles per tick; the rest wait for the next tick.
REAPER_BATCH = 500


# While the database is down, a run task that could not claim its run tries again this often.
CLAIM_RETRY_SECONDS = 2.0


@shared_task(name="agents.run_execution", bind=True, ignore_result=True)
def run_execution(self: Task[Any, Any], execution_id: str, *, agency_id: str) -> str:
    """Run or resume one execution. A duplicate delivery finds it claimed and returns.

    A database outage before the run was claimed (the claim did not commit; once claimed, the
    runtime rides an outage out itself) sends the task again in a few seconds instead of
    dropping it: the run starts as soon as the database is back, not at the reaper's
    pending re-delivery.

    A worker shutting down (agents/worker_drain.py) claims nothing more: a delivery it receives
    meanwhile, and a run it hands back at a step boundary, go to the delivery's queue again
    for another worker."""
    queue = (self.request.delivery_info or {}).get("routing_key") or None
    if drain.draining():
        worker_drain.send_back(execution_id, agency_id=agency_id, queue=queue)
        return drain.HANDED_BACK
    try:
        with worker_drain.holding(execution_id, agency_id=agency_id, queue=queue):
            outcome = run_loop(execution_id, agency_id=agency_id)
    except Exception as exc:
        if not database.is_transient(exc):
            raise
        limit = int(settings.AGENTDESK_DB_OUTAGE_WAIT_SECONDS / CLAIM_RETRY_SECONDS)
        logger.warning(
            "execution %s: not claimed, database unavailable (%s); retry %d of %d",
            execution_id,
            type(exc).__name__,
            self.request.retries + 1,
            limit,
        )
        raise self.retry(countdown=CLAIM_RETRY_SECONDS, max_retries=limit, exc=exc) from exc
    if outcome == drain.HANDED_BACK:  # committed: pending, its lease released
        worker_drain.send_back(execution_id, agency_id=agency_id, queue=queue)
    return outcome


# TenantTask runs these in the agency given as the `agency_id` keyword argument.
@shared_task(name="agents.dispatch_event", base=TenantTask, ignore_result=True)
def dispatch_event(event_id: str) -> int:
    event = Event.objects.filter(pk=event_id).first()
    if event is None:
        return 0
    return len(event_dispatch(event=event))


@shared_task(name="agents.run_scheduled", base=TenantTask, bind=True, ignore_result=True)
def run_scheduled(self: Task[Any, Any], agent_id: str) -> str | None:
    """Celery beat's entry for an agent's cron schedule: one run per tick.

    Beat gives each tick's message its own task id, and a message delivered again (acks_late: the
    worker died after the commit, before its ack) keeps it. The id goes into the trigger data as
    ``tick_id``; a unique index on the trigger log admits one invoked trigger per agent and tick,
    so a second delivery of the same tick starts nothing and logs a ``duplicate`` skip.
    """
    agent = Agent.objects.filter(pk=agent_id).first()
    if agent is None:
        if remove_orphaned_schedule(agent_id):  # beat would send its ticks forever
            logger.info("agent %s no longer exists: its cron entry is removed", agent_id)
        return None
    execution = execution_create_for_tick(agent, tick_id=self.request.id)
    return str(execution.id) if execution else None


@shared_task(name="agents.wake_execution", base=TenantTask, ignore_result=True)
def wake_execution(execution_id: str) -> None:
    """A parked run's delayed wake-up (agents.services.schedule_wake): resume it if its timer is
    due. Idempotent: a run already resumed, cancelled, or parked again for later is left alone
    (execution_resume_due decides on the locked row), and beat's timer check wakes whatever this
    message misses."""
    execution = Execution.objects.filter(pk=execution_id).first()
    if execution is not None:
        execution_resume_due(execution, now=timezone.now())


@shared_task(name="agents.reap_expired_leases", ignore_result=True)
def reap_expired_leases() -> int:
    """Beat: hand runs whose worker died (its heartbeat stopped, or the lease expired) to a new
    delivery, deliver again runs whose delivery was lost (pending too long, or the broker
    restarted), wake runs whose ``wait`` timer is due, dispatch again events whose dispatch
    was lost (unprocessed too long, or the broker restarted), and send again after-run work not
    done yet (agents/after_run.py).
    Platform-wide, so it reads across agencies. Rows a worker has locked (it is claiming or
    writing the run, dispatching the event) are skipped: that work is alive."""
    now = timezone.now()
    # A broker restart lost its queued messages and delayed wake-ups (ops/broker.py): every
    # pending run and unprocessed event is sent again now, not a period later.
    broker_restart = broker.restarted()
    with tenancy.platform_context():
        workers_lost = _lose_quiet_workers()
        stale = _release_runs_of_lost_workers(now)
        # A lost worker's received but unclaimed runs (prefetched, waiting for a retry, not
        # claimed yet) keep their messages with the broker until its visibility timeout: every
        # pending run is sent again now as well (docs/decisions/0008-run-delivery.md).
        catch_up = bool(broker_restart or workers_lost or any(row[3] for row in stale))
        if catch_up:
            pending_since = now
        else:
            pending_since = now - datetime.timedelta(
                seconds=settings.AGENTDESK_PENDING_REDELIVER_SECONDS
            )
        lost = _pending_to_deliver_again(since=pending_since, now=now)
        due = list(
            Execution.objects.filter(status=ExecutionStatus.WAITING_INPUT, wait_until__lte=now)
            .order_by("wait_until")  # the longest overdue first, when there are more than a batch
            .values_list("id", "agency_id")[:REAPER_BATCH]
        )
        heartbeat.prune()
    undispatched = _events_to_dispatch_again(now, everything=bool(broker_restart))
    for execution_id, agency_id, reason, _ in stale:
        logger.warning("execution %s: %s, re-delivering", execution_id, reason)
        run_execution.apply_async(args=[str(execution_id)], kwargs={"agency_id": str(agency_id)})
    _deliver_again(lost)
    delivered = len(stale) + len(lost)
    while catch_up and len(lost) == REAPER_BATCH:  # all of them, batch by batch
        with tenancy.platform_context():
            lost = _pending_to_deliver_again(since=pending_since, now=now)
        _deliver_again(lost)
        delivered += len(lost)
    for execution_id, agency_id in due:
        with tenancy.agency_context(agency_id):
            execution_resume_due(Execution.objects.get(pk=execution_id), now=now)
    dispatched = _dispatch_again(undispatched)
    while broker_restart and len(undispatched) == REAPER_BATCH:
        undispatched = _events_to_dispatch_again(now, everything=True)
        dispatched += _dispatch_again(undispatched)
    after_run_sent = after_run.send_again(now, everything=bool(broker_restart))
    if broker_restart:
        logger.warning(
            "broker restarted: %d pending runs, %d events and %d after-run tasks sent again",
            delivered - len(stale),
            dispatched,
            after_run_sent,
        )
        broker.remember(broker_restart)  # only now: a tick that died before does it again
    metrics.reaper_redelivered(
        worker_lost=len(stale),
        pending=delivered - len(stale),
        timer_due=len(due),
        event=dispatched,
        after_run=after_run_sent,
    )
    return delivered + len(due) + dispatched + after_run_sent


def _lose_quiet_workers() -> list[str]:
    """Worker processes quiet for AGENTDESK_HEARTBEAT_TIMEOUT_SECONDS while another process kept
    beating all that time: marked stopped (lost), each once, and returned. Without such a
    witness (the database was down for everyone, or it is the only worker) none is lost: a
    quiet process keeps its runs until it beats again or their leases run out.
    Precondition: platform context."""
    quiet_since = Now() - datetime.timedelta(seconds=settings.AGENTDESK_HEARTBEAT_TIMEOUT_SECONDS)
    witnessed = WorkerHeartbeat.objects.filter(
        stopped_at__isnull=True, last_seen__gte=quiet_since, beating_since__lte=quiet_since
    ).exists()
    lost = heartbeat.mark_lost(quiet_since=quiet_since) if witnessed else []
    if lost:
        logger.warning("worker processes lost (heartbeat quiet): %s", ", ".join(lost))
    return lost


def _release_runs_of_lost_workers(
    now: datetime.datetime,
) -> list[tuple[uuid.UUID, uuid.UUID, str, bool]]:
    """Running runs whose worker is gone, released (owner "") for a new delivery to claim:
    their lease ran out, or the process holding it is gone by its heartbeat
    (ops.WorkerHeartbeat): stopped (or lost: :func:`_lose_quiet_workers`), or started again
    under the same host and pid after the run's last write. A holder with no heartbeat row keeps
    its lease. Returns (id, agency, why, holder gone). Precondition: platform context."""
    gone = Q(stopped_at__isnull=False) | Q(started_at__gt=OuterRef("updated_at"))
    holder_gone = WorkerHeartbeat.objects.filter(gone, process=OuterRef("holder"))
    rows = list(
        Execution.objects.select_for_update(skip_locked=True)
        .filter(status=ExecutionStatus.RUNNING)
        # lease_owner is host:pid:thread (agents.runtime.loop.worker_id); the row is host:pid.
        .annotate(
            holder=Func(
                F("lease_owner"),
                Value(":[^:]*$"),
                Value(""),
                function="regexp_replace",
                output_field=CharField(),
            ),
            holder_gone=Exists(holder_gone),
        )
        .filter(
            Q(lease_expires_at__lt=now) | Q(lease_expires_at__isnull=True) | Q(holder_gone=True)
        )
        .order_by()
        .values_list("id", "agency_id", "lease_owner", "lease_expires_at", "holder_gone")[
            :REAPER_BATCH
        ]
    )
    # Released (owner "") and given a grace period, so that the next tick does not enqueue
    # the same run again before a worker has picked this delivery up.
    grace = datetime.timedelta(seconds=settings.AGENTDESK_REAPER_INTERVAL_SECONDS * 2)
    Execution.objects.filter(pk__in=[row[0] for row in rows]).update(
        lease_owner="", lease_expires_at=now + grace, updated_at=now
    )
    return [
        (
            pk,
            agency_id,
            f"worker {owner} stopped its heartbeat"
            if gone and (expires is None or expires >= now)
            else "lease expired",
            gone,
        )
        for pk, agency_id, owner, expires, gone in rows
    ]


def _pending_to_deliver_again(
    *, since: datetime.datetime, now: datetime.datetime
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """Runs pending since before ``since``, oldest first, one batch, marked as sent now.

    Pending this long: its delivery was lost (apply_async failed after the commit, the message
    went with a worker that died before its ack, or with a broker that restarted), or it still
    waits in a long queue. A new run and every resume (approval, wait, answer) pass through
    pending and set updated_at. Sending one more delivery is harmless: the claim takes a pending
    run once and the other delivery exits "not_claimed". updated_at is set again, so a run whose
    delivery is merely queued gets another only every period, not every tick (and a batch sent
    after a broker restart is not picked again by the next batch). Precondition: platform
    context."""
    lost = list(
        Execution.objects.select_for_update(skip_locked=True)
        .filter(status=ExecutionStatus.PENDING, updated_at__lt=since)
        .order_by("updated_at")
        .values_list("id", "agency_id")[:REAPER_BATCH]
    )
    Execution.objects.filter(pk__in=[pk for pk, _ in lost]).update(updated_at=now)
    return lost


def _deliver_again(runs: list[tuple[uuid.UUID, uuid.UUID]]) -> None:
    for execution_id, agency_id in runs:
        logger.warning("execution %s: still pending, delivering it again", execution_id)
        run_execution.apply_async(args=[str(execution_id)], kwargs={"agency_id": str(agency_id)})


def _dispatch_again(events: list[tuple[uuid.UUID, uuid.UUID]]) -> int:
    for event_id, agency_id in events:
        logger.warning("event %s: still unprocessed, dispatching it again", event_id)
        send_dispatch(event_id, agency_id)
    return len(events)


def _events_to_dispatch_again(
    now: datetime.datetime, *, everything: bool = False
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """Events with subscribers still unprocessed AGENTDESK_EVENT_REDISPATCH_SECONDS after they
    were written (or last sent again), oldest first: their dispatch message was lost (the broker
    refused the send after the commit, or the worker died inside the dispatch before its commit
    and the message went with it). updated_at is set again, so a backlog gets one more message
    per period, not one per tick. Dispatch takes the event's row lock and starts nothing for an
    event already processed, so a message sent twice starts its agents once.
    ``everything``: after a broker restart, every unprocessed one written (or sent) before now."""
    if everything:
        since = now
    else:
        since = now - datetime.timedelta(seconds=settings.AGENTDESK_EVENT_REDISPATCH_SECONDS)
    oldest = now - datetime.timedelta(seconds=settings.AGENTDESK_EVENT_REDISPATCH_MAX_AGE_SECONDS)
    with tenancy.platform_context():
        events = list(
            Event.objects.select_for_update(skip_locked=True)
            .filter(processed_at__isnull=True, updated_at__lt=since, created_at__gte=oldest)
            .order_by("created_at")  # the partial index core_event_unprocessed_idx
            .values_list("id", "agency_id")[:REAPER_BATCH]
        )
        Event.objects.filter(pk__in=[pk for pk, _ in events]).update(updated_at=now)
    return events
