"""After-run work: what must happen once a run has ended (its episode completed, its memories
extracted and its quality scored: ``memory.after_run``), recorded with the run's end and
delivered the way runs are, so that no broker or database outage loses it.

- :func:`record`, in the transaction that ends the run (``agents.lifecycle.finish_execution``): one
  :class:`~agents.models.AfterRunWork` row per task of ``AGENTDESK_AFTER_RUN_TASKS`` (one
  INSERT), each task sent once that commits. A broker that refuses the message is logged; the
  row stays.
- :func:`task` makes a function after-run work, a Celery task called with ``(execution_id,
  agency_id=...)``: retried with backoff when the database or the broker fails under it (an
  outage is waited out, not a reason to drop the work), and its row deleted once the work is
  done. The work must be idempotent (a message may come twice); one that finds another delivery
  doing it raises :class:`Busy`, which leaves the row to the reaper in case that one fails.
- :func:`send_again`, from beat's reaper: a row still here at its ``due_at`` (its message lost,
  its task failed for good) is sent again, once per ``AGENTDESK_AFTER_RUN_RESEND_SECONDS``, at
  most :data:`MAX_SENDS` times in all; after a broker restart every row is sent at once.
"""

from __future__ import annotations

import datetime
import functools
import logging
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from celery import Task, shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError, transaction
from django.db.models import F
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerOperationalError
from psycopg_pool import PoolTimeout
from redis.exceptions import ConnectionError as RedisConnectionError

from agents.models import AfterRunWork, Execution
from core import fastdb, sending, tenancy

logger = logging.getLogger(__name__)

# Messages per row (the first one included): a task that fails this many times for a reason that
# is not an outage (a bug) is left alone, its row kept for a person to see.
MAX_SENDS = 10
BATCH = 500  # rows the reaper sends again per query
# An outage under a running task: it is retried 2, 4, 8 ... 60, 60 s later, about 6 minutes in
# all; past that, the reaper's next sends of its row take over.
TRANSIENT_ERRORS = (
    OperationalError,
    InterfaceError,
    PoolTimeout,
    BrokerOperationalError,
    RedisConnectionError,
)
RETRY_BACKOFF = 2
RETRY_BACKOFF_MAX = 60
MAX_RETRIES = 10


class Busy(Exception):
    """Another delivery of the same task is doing the run's work right now: its row stays."""


def record(execution: Execution) -> None:
    """The run's after-run work, in the transaction that ends it; each task is sent once that
    commits. A run ends once (its status guard), so these are plain inserts.
    Precondition: the run's agency transaction."""
    tasks = tuple(settings.AGENTDESK_AFTER_RUN_TASKS)
    if not tasks:
        return
    due = timezone.now() + _resend_period()
    fastdb.insert_together(
        *(
            AfterRunWork(
                agency_id=execution.agency_id, execution_id=execution.id, task=name, due_at=due
            )
            for name in tasks
        )
    )
    execution_id, agency_id = execution.id, execution.agency_id
    transaction.on_commit(lambda: _send_all(execution_id, agency_id, tasks))


def task(name: str) -> Callable[[Callable[..., str]], Task[Any, Any]]:
    """Register ``work(execution_id: str, *, agency_id: str) -> str`` as the after-run task
    ``name`` (module docstring). ``work`` runs with no transaction open (it sets its own tenant)."""

    def register(work: Callable[..., str]) -> Task[Any, Any]:
        @functools.wraps(work)
        def run(execution_id: str, *, agency_id: str) -> str:
            try:
                outcome = work(execution_id, agency_id=agency_id)
            except Busy as busy:
                logger.info(
                    "execution %s: %s left to another delivery (%s)", execution_id, name, busy
                )
                return f"busy: {busy}"
            done(uuid.UUID(execution_id), agency_id=uuid.UUID(agency_id), task_name=name)
            return outcome

        registered: Task[Any, Any] = shared_task(
            name=name,
            ignore_result=True,
            autoretry_for=TRANSIENT_ERRORS,
            retry_backoff=RETRY_BACKOFF,
            retry_backoff_max=RETRY_BACKOFF_MAX,
            retry_jitter=False,
            max_retries=MAX_RETRIES,
        )(run)
        return registered

    return register


def done(execution_id: uuid.UUID, *, agency_id: uuid.UUID, task_name: str) -> None:
    """The run's ``task_name`` has done its work: its row goes."""
    with tenancy.agency_context(agency_id):
        AfterRunWork.objects.filter(execution_id=execution_id, task=task_name).delete()


def send_again(now: datetime.datetime, *, everything: bool = False) -> int:
    """Beat's reaper: rows due by ``now`` (``everything``, after a broker restart: every row
    written before now), oldest first, sent again with their ``due_at`` a period on; returns how
    many. Rows a task is deleting are skipped (locked). Reads across agencies."""
    period = _resend_period()
    sent = 0
    while True:
        with tenancy.platform_context():
            due = AfterRunWork.objects.select_for_update(skip_locked=True).filter(
                sends__lt=MAX_SENDS
            )
            # (strictly before now + period: a row this loop moved on is not picked again)
            due = due.filter(due_at__lt=now + period) if everything else due.filter(due_at__lte=now)
            rows = list(
                due.order_by("due_at").values_list("id", "execution_id", "agency_id", "task")[
                    :BATCH
                ]
            )
            AfterRunWork.objects.filter(pk__in=[row[0] for row in rows]).update(
                due_at=now + period, sends=F("sends") + 1, updated_at=now
            )
        for _, execution_id, agency_id, name in rows:
            logger.warning("execution %s: %s still not done, sending it again", execution_id, name)
            _send(execution_id, agency_id, name)
        sent += len(rows)
        if not everything or len(rows) < BATCH:
            return sent


def _send_all(execution_id: uuid.UUID, agency_id: uuid.UUID, tasks: Sequence[str]) -> None:
    for name in tasks:
        _send(execution_id, agency_id, name)


def _send(execution_id: uuid.UUID, agency_id: uuid.UUID, name: str) -> None:
    sending.send_task(
        name,
        execution_id,
        agency_id=agency_id,
        about=f"execution {execution_id}",
        then="beat's reaper sends it again after AGENTDESK_AFTER_RUN_RESEND_SECONDS",
    )


def _resend_period() -> datetime.timedelta:
    return datetime.timedelta(seconds=settings.AGENTDESK_AFTER_RUN_RESEND_SECONDS)
