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
import threading
import time

import psycopg
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.dispatch import Signal
from psycopg_pool import ConnectionPool, PoolTimeout

logger = logging.getLogger(__name__)
# Sent (with ``alias``) when a stalled pool is replaced, the last resort: ops counts it
# (agentdesk_db_pool_replacements_total). A signal: core imports nothing above it.
pool_replaced = Signal()
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


def answers_fresh_connection(db: BaseDatabaseWrapper, *, timeout: int = 2) -> None:
    """A query on a new connection, not one of the pool's (which may still hold dead ones, or
    make the caller wait its whole timeout). Raises what connecting or the query raised."""
    params = db.settings_dict
    with psycopg.connect(
        dbname=params["NAME"],
        user=params["USER"],
        password=params["PASSWORD"],
        host=params["HOST"] or None,
        port=params["PORT"] or None,
        connect_timeout=timeout,
        autocommit=True,
    ) as conn:
        conn.execute("SELECT 1").fetchone()


_replacing = threading.Lock()


def refused_for_outage(exc: BaseException, what: str) -> None:
    """A web request is refused (503) because the database could not serve it: logged, and a
    pool that stalls once the database answers again is replaced.

    While the database is down, waiting the pool's whole timeout for a connection is expected.
    Once a new connection goes through, a pool that still gives none is stalled (between
    reconnection attempts, or short of connections some thread never gave back): its figures
    are logged and the next request gets a new pool, instead of the site answering 503 for as
    long as the pool's own recovery takes."""
    logger.warning("%s refused, database unavailable: %s", what, exc)
    if not _caused_by_pool_timeout(exc):
        return
    pool: ConnectionPool | None = getattr(connection, "pool", None)
    if pool is None:
        return
    if not _replacing.acquire(blocking=False):  # another request is at it
        return
    try:
        try:
            answers_fresh_connection(connection)
        except Exception:
            return  # still down: the pool is right to wait
        _replace(pool)
    finally:
        _replacing.release()


def _replace(pool: ConnectionPool) -> None:
    wrapper = connections[connection.alias]  # `connection` is a proxy to it
    pools: dict[str, ConnectionPool] = getattr(type(wrapper), "_connection_pools", {})
    if pools.get(connection.alias) is not pool:  # Django's cache, per alias: replaced already
        return
    logger.error(
        "the database answers but its pool gave no connection: replacing it, a last resort "
        "(connections held somewhere and not given back?) (%s)",
        pool.get_stats(),
    )
    del pools[connection.alias]
    pool_replaced.send(sender=None, alias=connection.alias)
    # Closing waits for its threads: not on this request's time.
    threading.Thread(target=pool.close, name="close-stalled-pool", daemon=True).start()


def pool_stats(alias: str = "default") -> dict[str, int] | None:
    """This process's pool's figures (psycopg_pool's ``get_stats()``: ``pool_size``,
    ``pool_available``, ``requests_waiting``...), or None when it has no pool (yet). Never
    opens one."""
    wrapper = connections[alias]
    pools: dict[str, ConnectionPool] = getattr(type(wrapper), "_connection_pools", {})
    pool = pools.get(alias)
    return None if pool is None else pool.get_stats()


def _caused_by_pool_timeout(exc: BaseException) -> bool:
    current: BaseException | None = exc
    for _ in range(10):
        if current is None:
            return False
        if isinstance(current, PoolTimeout):
            return True
        current = current.__cause__ or current.__context__
    return False
