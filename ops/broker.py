"""Whether the broker restarted since the lease reaper last looked.

A Redis restart (or failover) loses what it held that was not saved: queued task messages, the
delayed wake-ups, the messages of runs a worker had reserved. Redis names each start with a new
``run_id`` (``INFO server``); the reaper compares it with the one it saw last, kept in the
database (``ops.BrokerState``), and on a change delivers every pending run and unprocessed event
again at once instead of waiting for ``AGENTDESK_PENDING_REDELIVER_SECONDS``. A delivery too many
is harmless (a run is claimed once, an event dispatched once).

Only a Redis broker is checked; another one keeps the periodic re-delivery alone.
"""

from __future__ import annotations

import logging
import threading

import redis
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ops.models import BrokerState

logger = logging.getLogger(__name__)

STATE_NAME = "broker"
_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")

_lock = threading.Lock()
_client: redis.Redis | None = None
# The run_id this process last saw recorded: an unchanged broker costs one INFO, no query.
_known: str | None = None


def _redis() -> redis.Redis | None:
    global _client  # noqa: PLW0603 - one client (and connection pool) per process
    url = str(settings.CELERY_BROKER_URL or "")
    if not url.startswith(_REDIS_SCHEMES):
        return None
    with _lock:
        if _client is None:
            try:
                _client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
            except ValueError:  # a URL redis-py does not take (a failover list): not checked
                logger.warning("broker restart check: cannot read the broker URL as Redis")
                return None
        return _client


def current_run_id() -> str | None:
    """The broker's run_id now, or None (not Redis, or it does not answer)."""
    client = _redis()
    if client is None:
        return None
    try:
        info = client.info("server")
    except redis.RedisError as exc:
        logger.warning("broker restart check: Redis did not answer INFO (%s)", exc)
        return None
    run_id = info.get("run_id")
    return str(run_id) if run_id else None


def restarted() -> str | None:
    """The broker's new run_id when it changed since :func:`remember` was last called with the
    previous one, else None. The first look ever only records it (nothing was lost that the
    reaper could know of). Call :func:`remember` once what was lost has been sent again, so
    that a reaper that dies in between leaves the work to the next tick."""
    run_id = current_run_id()
    if run_id is None or run_id == _known:
        return None
    state = BrokerState.objects.filter(name=STATE_NAME).first()
    if state is None:
        remember(run_id)
        return None
    if state.run_id == run_id:
        _know(run_id)
        return None
    logger.warning("the broker restarted (run id %s, was %s)", run_id, state.run_id)
    return run_id


def remember(run_id: str) -> None:
    """Record ``run_id`` as the broker the reaper has caught up with."""
    BrokerState.objects.update_or_create(
        name=STATE_NAME, defaults={"run_id": run_id, "seen_at": timezone.now()}
    )
    _know(run_id)


def _know(run_id: str) -> None:
    """Keep ``run_id`` in this process's memory once the database has it for good: a row
    rolled back must not leave the memory saying the broker is known."""

    def known() -> None:
        global _known  # noqa: PLW0603
        _known = run_id

    transaction.on_commit(known)
