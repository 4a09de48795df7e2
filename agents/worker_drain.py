"""A worker's drain on SIGTERM (issue 29; README, "The agent runtime").

Celery's warm shutdown stops taking deliveries at once and then waits for every task to end,
which for a run can be minutes; a cold one abandons them, and their runs wait for the reaper
(its soft shutdown, ``worker_soft_shutdown_timeout``, is a fixed wait before the cold one: the
runs would not know to stop). Instead, on SIGTERM (Celery's ``worker_shutting_down``, connected
here; agents.tasks imports this module in every worker):

- every run of this process hands itself back at its next step boundary, once the step in
  flight has committed (agents/runtime/drain.py): pending again, its lease released in the
  same commit, and sent to its queue again by its task (:func:`send_back`), so another worker
  claims it within moments. A delivery received meanwhile is sent back unclaimed;
- a watchdog ends the process within ``AGENTDESK_WORKER_DRAIN_SECONDS``: what is still held
  then (a model or tool call that outlasted the period) is released from here
  (:func:`agents.services.handback.execution_hand_back`), its thread's later writes failing
  their lease fence, the heartbeat is marked stopped, and the process exits.

Supported with the ``threads`` pool (the default) and ``solo``: a prefork child is not told.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

from celery.concurrency.prefork import TaskPool as PreforkPool
from celery.signals import worker_ready, worker_shutting_down
from django.conf import settings
from django.db import connection

from agents.models import Execution, ExecutionStatus
from agents.runtime import drain
from agents.services.handback import execution_hand_back
from agents.services.start import RUN_TASK
from core import tenancy
from core.sending import send_task
from ops import heartbeat

logger = logging.getLogger(__name__)

# Of the drain period, at most this much is kept to release what is still held and exit.
RELEASE_RESERVE_SECONDS = 2.0

# The runs this process's deliveries hold: execution id -> (agency id, the delivery's queue).
_held: dict[str, tuple[str, str | None]] = {}
_lock = threading.Lock()
_begun = threading.Event()
_watchdog: threading.Thread | None = None


@contextlib.contextmanager
def holding(
    execution_id: uuid.UUID | str, *, agency_id: uuid.UUID | str, queue: str | None
) -> Iterator[None]:
    """The block is a delivery of the run (its task): released from here if the drain period
    runs out inside it."""
    key = str(execution_id)
    with _lock:
        _held[key] = (str(agency_id), queue)
    try:
        yield
    finally:
        with _lock:
            _held.pop(key, None)


def send_back(
    execution_id: uuid.UUID | str, *, agency_id: uuid.UUID | str, queue: str | None
) -> None:
    """Deliver the run (handed back, or received while draining) to ``queue`` again, for
    another worker. A broker that refuses is logged: the run stays pending for the reaper."""
    send_task(
        RUN_TASK,
        execution_id,
        agency_id=agency_id,
        queue=queue,
        about=f"execution {execution_id} (handed back)",
        then="it stays pending and the reaper delivers it again later",
    )


@worker_ready.connect
def _armed(sender: Any = None, **_: Any) -> None:
    """Where the runs are: the worker's own process (threads, solo); its watchdog starts with
    it."""
    if not isinstance(getattr(sender, "pool", None), PreforkPool):
        arm()


@worker_shutting_down.connect
def _shutting_down(**_: Any) -> None:
    begin()


def arm() -> None:
    """Start the watchdog, idle until :func:`begin` (once per process, as the worker starts:
    no thread is started from a signal handler)."""
    global _watchdog  # noqa: PLW0603 - one per process
    with _lock:
        if _watchdog is not None and _watchdog.is_alive():
            return
        seconds = float(settings.AGENTDESK_WORKER_DRAIN_SECONDS)
        _watchdog = threading.Thread(
            target=_watch, args=(seconds,), name="agentdesk-drain", daemon=True
        )
        _watchdog.start()


def begin() -> None:
    """SIGTERM (inside the signal handler: sets two flags, nothing else)."""
    drain.begin()
    _begun.set()


def _watch(seconds: float) -> None:
    _begun.wait()
    with _lock:
        held = len(_held)
    logger.warning(
        "worker shutting down: no new deliveries; %d runs are handed back at their next step; "
        "exiting within %.0f s (AGENTDESK_WORKER_DRAIN_SECONDS)",
        held,
        seconds,
    )
    time.sleep(max(seconds - min(RELEASE_RESERVE_SECONDS, seconds / 4), 0.0))
    os._exit(_release_held())


def _release_held() -> int:
    """The drain period ran out: hand back what this process still holds, mark its heartbeat
    stopped (the reaper releases at its next tick whatever could not be), and return the exit
    code: 0 when nothing is left held, 1 otherwise."""
    with _lock:
        left = dict(_held)
    process = heartbeat.process_id()
    released = 0
    for execution_id, (agency_id, queue) in left.items():
        released += execution_hand_back(
            execution_id=execution_id, agency_id=agency_id, process=process, queue=queue
        )
    try:
        with tenancy.platform_context():
            still = Execution.objects.filter(
                status=ExecutionStatus.RUNNING, lease_owner__startswith=f"{process}:"
            ).count()
    except Exception:
        logger.exception("worker drain: could not count the runs still held")
        still = -1
    finally:
        connection.close()
    logger.warning(
        "worker drain period over: %d deliveries in flight, %d runs released here, %s still "
        "held (left to the reaper); exiting",
        len(left),
        released,
        still if still >= 0 else "unknown",
    )
    heartbeat.stop()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    return 0 if still == 0 else 1
