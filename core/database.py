"""Riding out a database outage (a restart, a failover, a dropped network path).

After PostgreSQL restarts, every connection a process pooled before is dead, and each one fails
the first query made on it. :func:`is_transient` tells such a failure from a bug;
:func:`wait_until_available` drops the dead connections (``pool.check()``: once per outage, not
on every checkout, which would add a round trip to every runtime step) and waits until a query
goes through again, or gives up with :class:`Unavailable` after
``AGENTDESK_DB_OUTAGE_WAIT_SECONDS``.
"""

from __future__ import annotations

import contextlib
import logging
import time

import psycopg
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection
from psycopg_pool import PoolTimeout

logger = logging.getLogger(__name__)
# Between probes while the database is down: short at first (a blip), then every 2 s.
PROBE_DELAYS = (0.1, 0.25, 0.5, 1.0, 2.0)


class Unavailable(Exception):
    """The database did not come back within the wait."""


_TRANSIENT = (
    OperationalError,
    InterfaceError,
    psycopg.OperationalError,
    psycopg.InterfaceError,
    PoolTimeout,
)


def is_transient(exc: BaseException) -> bool:
    """A lost or refused connection (or a pool with none to give), here or as the cause of
    what was raised: worth waiting out and retrying, not a reason to fail anything."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, _TRANSIENT):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def _discard_dead_connections() -> None:
    with contextlib.suppress(Exception):  # it is dead: closing it can fail too
        connection.close()  # this thread's (a broken one is not given back to the pool)
    pool = getattr(connection, "pool", None)
    if pool is not None:
        try:
            pool.check()  # the idle ones: each tested, the dead replaced
        except Exception:
            logger.debug("pool check failed; the probe decides", exc_info=True)


def available() -> bool:
    """One query through this thread's connection."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:
        if not is_transient(exc):
            raise
        _discard_dead_connections()
        return False
    return True


def wait_until_available(timeout: float | None = None) -> float:
    """Block until the database answers; returns the seconds waited. Raises
    :class:`Unavailable` after ``timeout`` (default ``AGENTDESK_DB_OUTAGE_WAIT_SECONDS``)."""
    limit = settings.AGENTDESK_DB_OUTAGE_WAIT_SECONDS if timeout is None else timeout
    started = time.monotonic()
    _discard_dead_connections()
    for attempt in range(1_000_000):
        if available():
            waited = time.monotonic() - started
            if attempt:
                logger.warning("database available again after %.1f s", waited)
            return waited
        if time.monotonic() - started >= limit:
            raise Unavailable(f"the database did not answer for {limit:.0f} s")
        time.sleep(PROBE_DELAYS[min(attempt, len(PROBE_DELAYS) - 1)])
    raise Unavailable("unreachable")
