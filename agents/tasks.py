"""Celery tasks of the runtime: thin wrappers that take ids and call the runtime or services."""

from __future__ import annotations

import datetime
import logging
import uuid
from typing import Any

from celery import Task, shared_task
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from agents.models import Agent, Execution, ExecutionStatus
from agents.runtime.loop import run_execution as run_loop
from agents.schedules import remove_orphaned_schedule
from agents.services import event_dispatch, execution_create_for_tick, execution_resume_due
from core import tenancy
from core.events import send_dispatch
from core.models import Event
from core.tenancy import TenantTask

logger = logging.getLogger(__name__)
# Rows of each kind the reaper handles per tick; the rest wait for the next tick.
REAPER_BATCH = 500


@shared_task(name="agents.run_execution", ignore_result=True)
def run_execution(execution_id: str, *, agency_id: str) -> str:
    """Run or resume one execution. A duplicate delivery finds it claimed and returns."""
    return run_loop(execution_id, agency_id=agency_id)


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
    """Beat: hand runs whose worker died (lease expired) to a new delivery, deliver again runs
    whose delivery was lost (pending too long), wake runs whose ``wait`` timer is due, and
    dispatch again events whose dispatch was lost (unprocessed too long).
    Platform-wide, so it reads across agencies. Rows a worker has locked (it is claiming or
    writing the run, dispatching the event) are skipped: that work is alive."""
    now = timezone.now()
    grace = datetime.timedelta(seconds=settings.AGENTDESK_REAPER_INTERVAL_SECONDS * 2)
    pending_since = now - datetime.timedelta(seconds=settings.AGENTDESK_PENDING_REDELIVER_SECONDS)
    with tenancy.platform_context():
        stale = list(
            Execution.objects.select_for_update(skip_locked=True)
            .filter(status=ExecutionStatus.RUNNING)
            .filter(Q(lease_expires_at__lt=now) | Q(lease_expires_at__isnull=True))
            .order_by()
            .values_list("id", "agency_id")[:REAPER_BATCH]
        )
        # Released (owner "") and given a grace period, so that the next tick does not enqueue
        # the same run again before a worker has picked this delivery up.
        Execution.objects.filter(pk__in=[pk for pk, _ in stale]).update(
            lease_owner="", lease_expires_at=now + grace, updated_at=now
        )
        # Pending this long: its delivery was lost (apply_async failed after the commit, the
        # message went with a worker that died before its ack), or it still waits in a long
        # queue. A new run and every resume (approval, wait, answer) pass through pending and
        # set updated_at. Sending one more delivery is harmless: the claim takes a pending run
        # once and the other delivery exits "not_claimed". updated_at is set again, so a run
        # whose delivery is merely queued gets another only every period, not every tick.
        lost = list(
            Execution.objects.select_for_update(skip_locked=True)
            .filter(status=ExecutionStatus.PENDING, updated_at__lt=pending_since)
            .order_by("updated_at")
            .values_list("id", "agency_id")[:REAPER_BATCH]
        )
        Execution.objects.filter(pk__in=[pk for pk, _ in lost]).update(updated_at=now)
        due = list(
            Execution.objects.filter(status=ExecutionStatus.WAITING_INPUT, wait_until__lte=now)
            .order_by("wait_until")  # the longest overdue first, when there are more than a batch
            .values_list("id", "agency_id")[:REAPER_BATCH]
        )
    undispatched = _events_to_dispatch_again(now)
    for execution_id, agency_id in stale:
        logger.warning("execution %s: lease expired, re-delivering", execution_id)
        run_execution.apply_async(args=[str(execution_id)], kwargs={"agency_id": str(agency_id)})
    for execution_id, agency_id in lost:
        logger.warning("execution %s: still pending, delivering it again", execution_id)
        run_execution.apply_async(args=[str(execution_id)], kwargs={"agency_id": str(agency_id)})
    for execution_id, agency_id in due:
        with tenancy.agency_context(agency_id):
            execution_resume_due(Execution.objects.get(pk=execution_id), now=now)
    for event_id, agency_id in undispatched:
        logger.warning("event %s: still unprocessed, dispatching it again", event_id)
        send_dispatch(event_id, agency_id)
    return len(stale) + len(lost) + len(due) + len(undispatched)


def _events_to_dispatch_again(now: datetime.datetime) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """Events with subscribers still unprocessed AGENTDESK_EVENT_REDISPATCH_SECONDS after they
    were written (or last sent again), oldest first: their dispatch message was lost (the broker
    refused the send after the commit, or the worker died inside the dispatch before its commit
    and the message went with it). updated_at is set again, so a backlog gets one more message
    per period, not one per tick. Dispatch takes the event's row lock and starts nothing for an
    event already processed, so a message sent twice starts its agents once."""
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
