"""Operations' tables (platform-wide, not agency-owned: no agency column, no row-level security).

The runtime role reads and writes them through the schema's default privileges
(``core.db_roles.grant_runtime``), like django-celery-beat's tables.
"""

from __future__ import annotations

from django.db import models


class WorkerHeartbeat(models.Model):
    """A worker process that says it is alive (ops/heartbeat.py), one row per process.

    ``process`` is ``host:pid``, the prefix of the ``lease_owner`` its runs carry
    (``agents.runtime.loop.worker_id()`` is ``host:pid:thread``). The lease reaper hands the
    runs of a process on to another worker once it is ``stopped_at``, when the run was last
    written before ``started_at`` (a process that took over a dead one's host and pid, as a
    restarted container does), or once its ``last_seen`` is older than
    ``AGENTDESK_HEARTBEAT_TIMEOUT_SECONDS`` while another process kept beating all that time
    (``beating_since``): a database that was down for everyone silences every heartbeat at
    once, and that is no worker's death. A process with no row falls back to the lease.
    The times are the database's clock (``now()``), like the runs' ``updated_at``.
    """

    process = models.CharField(max_length=200, primary_key=True)
    # When the process began (before it could claim anything), not when this row was written.
    started_at = models.DateTimeField()
    # Since when it has beaten without a gap (its start, or its first beat after one).
    beating_since = models.DateTimeField()
    last_seen = models.DateTimeField()
    # A clean shutdown (Celery's worker_shutdown): its runs need not wait for the timeout. Or
    # the reaper found the process lost (quiet while another kept beating) and handed on its
    # runs, running and pending (ops.heartbeat.mark_lost); a next beat clears it.
    stopped_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-last_seen"]

    def __str__(self) -> str:
        return self.process


class BrokerState(models.Model):
    """What the lease reaper last saw of the broker: Redis's ``run_id``, which changes on every
    restart (or failover). A change means queued messages and delayed wake-ups may be gone, so
    the reaper delivers every pending run and unprocessed event again (agents/tasks.py). Kept in
    the database, because a broker restart loses what the broker held."""

    name = models.CharField(max_length=50, primary_key=True)
    run_id = models.CharField(max_length=100)
    seen_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name}: {self.run_id}"
