"""Celery tasks of teams: a delegated run's end resuming the run that waits for it, and the
expiry of a delegating run's wait (a delayed message at its deadline, and beat's sweep for the
ones it misses, which also redoes the resumes that were lost)."""

from __future__ import annotations

import datetime
import logging

from celery import shared_task
from django.db.models import TextField
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast
from django.utils import timezone

from agents.models import TERMINAL_STATUSES, Execution, ExecutionStatus, TriggerType
from core import tenancy
from core.tenancy import TenantTask
from teams.services.ending import RESUME_TASK, parent_resume
from teams.services.expiry import wait_expire

logger = logging.getLogger(__name__)
EXPIRY_BATCH = 500
# A delegated run ended this long ago whose parent still waits for it lost its resume message.
RESUME_GRACE = datetime.timedelta(seconds=60)


@shared_task(name=RESUME_TASK, base=TenantTask, ignore_result=True)
def resume_parent(child_id: str) -> bool:
    """A delegated run ended: its answer to its parent, and the parent resumed if it still waits
    for it (decided on the parent's locked row: exactly once)."""
    child = Execution.objects.select_related("agent").filter(pk=child_id).first()
    return child is not None and parent_resume(child=child)


@shared_task(name="teams.expire_wait", base=TenantTask, ignore_result=True)
def expire_wait(execution_id: str) -> bool:
    """A delegating run's deadline: it times out if it still waits (decided on the locked row)."""
    execution = Execution.objects.filter(pk=execution_id).first()
    return execution is not None and wait_expire(execution, now=timezone.now())


@shared_task(name="teams.expire_waits", ignore_result=True)
def expire_waits() -> int:
    """Beat: runs waiting for another agent past their deadline time out (their children are
    cancelled), and those whose delegated run ended long ago are resumed (its resume was lost).
    Found across agencies, each ended in its own agency; one that fails does not stop the rest."""
    now = timezone.now()
    with tenancy.platform_context():
        due = list(
            Execution.objects.filter(status=ExecutionStatus.WAITING_AGENT, wait_until__lte=now)
            .order_by("wait_until")
            .values_list("id", "agency_id")[:EXPIRY_BATCH]
        )
    expired = 0
    for execution_id, agency_id in due:
        try:
            with tenancy.agency_context(agency_id):
                expired += wait_expire(Execution(pk=execution_id), now=now)
        except Exception:  # one run's failure must not hold up the others' expiry
            logger.exception("execution %s: its wait's expiry failed", execution_id)
    if expired:
        logger.info("%d run(s) waiting for another agent reached their deadline", expired)
    _resume_unanswered(now)
    return expired


def _resume_unanswered(now: datetime.datetime) -> None:
    """Runs still waiting for a delegated run that ended a while ago: its teams.resume_parent
    was lost (a failed send), so it is done here."""
    with tenancy.platform_context():
        ended = list(
            Execution.objects.filter(
                trigger_type=TriggerType.AGENT,
                status__in=TERMINAL_STATUSES,
                completed_at__lte=now - RESUME_GRACE,
                parent__status=ExecutionStatus.WAITING_AGENT,
            )
            .alias(awaited=KeyTextTransform("execution_id", "parent__input_request"))
            .filter(awaited=Cast("id", TextField()))
            .values_list("id", "agency_id")[:EXPIRY_BATCH]
        )
    for child_id, agency_id in ended:
        try:
            with tenancy.agency_context(agency_id):
                child = Execution.objects.select_related("agent").get(pk=child_id)
                if parent_resume(child=child):
                    logger.warning("execution %s: its parent's lost resume was redone", child_id)
        except Exception:
            logger.exception("execution %s: its parent's resume failed", child_id)
