"""Worker heartbeats: how a dead worker is noticed in seconds instead of at its runs' lease.

Each worker process that runs tasks (the main process of the ``threads`` / ``solo`` pools, each
child of ``prefork``) writes its ``ops.WorkerHeartbeat`` row every
``AGENTDESK_HEARTBEAT_SECONDS`` from a daemon thread, started by Celery's signals
(config/celery_app.py), and marks it stopped on a clean shutdown. The lease reaper
(``agents.tasks.reap_expired_leases``) hands the runs of a process whose row went quiet for
``AGENTDESK_HEARTBEAT_TIMEOUT_SECONDS`` to another worker.

The thread has a connection of its own, outside Django and its pool: a worker whose 64 threads
hold every pooled connection must still say it is alive, or its runs would be taken from it.
A write that fails (database down) is logged and tried again at the next beat; it never raises
into the worker. A process that stops beating while it is alive (its database path is cut) loses
its runs to another worker: the runtime's fenced writes stop it from writing to them again.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import socket
import threading
import time
from typing import Any

import psutil
import psycopg
from django.conf import settings
from django.db.models.functions import Now
from psycopg.conninfo import make_conninfo

from core import db_roles
from ops.models import WorkerHeartbeat

logger = logging.getLogger(__name__)

# Rows of processes quiet this long are deleted (by the reaper): their runs went on long ago.
KEEP_QUIET_ROWS = datetime.timedelta(days=1)
# Subtracted from the process's start when it is written: a run this process claims is always
# written after its started_at, even with the few milliseconds between reading the uptime and the
# database's now(). A dead predecessor's run written within it falls back to its lease.
START_MARGIN_SECONDS = 1.0

# A beat that comes more than ``gap`` seconds after the previous one (or after a stop) starts a
# new streak: see ops.models.WorkerHeartbeat.beating_since.
_UPSERT_SQL = (
    "INSERT INTO ops_workerheartbeat (process, started_at, beating_since, last_seen, stopped_at)"
    " VALUES (%(process)s, now() - make_interval(secs => %(uptime)s), now(), now(), NULL)"
    " ON CONFLICT (process) DO UPDATE SET started_at = EXCLUDED.started_at,"
    " beating_since = CASE WHEN ops_workerheartbeat.stopped_at IS NOT NULL"
    " OR ops_workerheartbeat.last_seen < now() - make_interval(secs => %(gap)s)"
    " THEN now() ELSE ops_workerheartbeat.beating_since END,"
    " last_seen = EXCLUDED.last_seen, stopped_at = NULL"
)
_STOPPED_SQL = (
    "UPDATE ops_workerheartbeat SET last_seen = now(), stopped_at = now()"
    " WHERE process = %(process)s"
)


def streak_gap() -> float:
    """The longest pause between two beats of one streak (seconds). A process that paused less
    is at most this plus one interval quiet when the reaper looks: below the timeout, so a
    database outage shorter than this, which keeps every streak, makes no process look dead."""
    return float(
        settings.AGENTDESK_HEARTBEAT_TIMEOUT_SECONDS - settings.AGENTDESK_HEARTBEAT_SECONDS
    )


def process_id() -> str:
    """``host:pid``: the prefix of ``agents.runtime.loop.worker_id()`` (``host:pid:thread``)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _conninfo() -> str:
    conninfo = db_roles.conninfo_from_settings(settings.DATABASES["default"])
    # Bounded waits: a beat must not hang long on a database that went away (tcp_user_timeout:
    # unacknowledged writes on a TCP connection; ignored on a unix socket, which fails at once).
    return make_conninfo(
        conninfo,
        connect_timeout=2,
        tcp_user_timeout=5000,
        keepalives=1,
        keepalives_idle=5,
        keepalives_interval=2,
        keepalives_count=2,
        application_name="agentdesk-heartbeat",
    )


class Heartbeat(threading.Thread):
    """The daemon thread that keeps one process's row fresh."""

    def __init__(self, *, interval: float) -> None:
        super().__init__(name="agentdesk-heartbeat", daemon=True)
        self.process = process_id()
        self.interval = interval
        self._stop_event = threading.Event()
        self._conn: psycopg.Connection[Any] | None = None
        self._failing = False
        self._process_started = psutil.Process().create_time()  # the host's clock, as time.time()

    def run(self) -> None:
        while True:
            self.beat()
            if self._stop_event.wait(self.interval):
                return

    def beat(self) -> bool:
        """Write ``last_seen``; False (logged) when the database did not take it."""
        uptime = max(time.time() - self._process_started, 0.0) + START_MARGIN_SECONDS
        return self._write(
            _UPSERT_SQL, {"process": self.process, "uptime": uptime, "gap": streak_gap()}
        )

    def stop(self) -> None:
        """Stop beating and mark the process stopped (a clean shutdown: its runs are done, or
        were abandoned by a cold one and may go on elsewhere at once)."""
        self._stop_event.set()
        if self.is_alive() and self is not threading.current_thread():
            self.join(timeout=self.interval + 5)
        self._write(_STOPPED_SQL, {"process": self.process})
        self._close()

    def _write(self, statement: str, params: dict[str, Any]) -> bool:
        try:
            if self._conn is None or self._conn.closed:
                self._conn = psycopg.connect(
                    _conninfo(),
                    autocommit=True,
                    # As the deployment has it (DATABASE_PREPARE_THRESHOLD: None behind a
                    # transaction-mode pgbouncer).
                    prepare_threshold=settings.DATABASES["default"]["OPTIONS"].get(
                        "prepare_threshold"
                    ),
                )
            self._conn.execute(statement, params)
        except Exception as exc:
            self._close()
            if not self._failing:  # once per outage, not every few seconds
                logger.warning("worker heartbeat of %s not written: %s", self.process, exc)
            self._failing = True
            return False
        if self._failing:
            logger.warning("worker heartbeat of %s written again", self.process)
            self._failing = False
        return True

    def _close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):  # it may be dead already
                self._conn.close()
            self._conn = None


_lock = threading.Lock()
_current: Heartbeat | None = None


def start() -> Heartbeat:
    """Start this process's heartbeat (idempotent per process): the first row is written before
    this returns, so it exists before the worker takes its first task whenever the database is
    up. After a fork, the child starts its own."""
    global _current  # noqa: PLW0603 - one heartbeat per process
    with _lock:
        if _current is not None and _current.process == process_id() and _current.is_alive():
            return _current
        heartbeat = Heartbeat(interval=settings.AGENTDESK_HEARTBEAT_SECONDS)
        heartbeat.beat()
        heartbeat.start()
        _current = heartbeat
        return heartbeat


def stop() -> None:
    """Stop this process's heartbeat, if it has one, and mark the process stopped."""
    global _current
    with _lock:
        heartbeat, _current = _current, None
    if heartbeat is not None and heartbeat.process == process_id():
        heartbeat.stop()


def mark_lost(*, quiet_since: Any) -> list[str]:
    """Processes not stopped whose last beat is before ``quiet_since``, marked stopped now and
    returned: lost (killed, frozen, cut off from the database). Each loss is returned once: the
    reaper then sends every pending run again, since the messages such a process had received
    but not started stay with the broker until its visibility timeout
    (docs/decisions/0008-run-delivery.md). A process that comes back starts a new streak
    (:data:`_UPSERT_SQL`). The caller decides that a loss is witnessed (another process kept
    beating); precondition: inside a transaction, which holds the rows' locks until it commits."""
    quiet = WorkerHeartbeat.objects.filter(stopped_at__isnull=True, last_seen__lt=quiet_since)
    lost = list(quiet.select_for_update(skip_locked=True).values_list("process", flat=True))
    WorkerHeartbeat.objects.filter(process__in=lost).update(stopped_at=Now())
    return lost


def prune() -> int:
    """Delete the rows of processes quiet for a day (one statement; the reaper calls it)."""
    deleted, _ = WorkerHeartbeat.objects.filter(last_seen__lt=Now() - KEEP_QUIET_ROWS).delete()
    return deleted
