"""The check a worker's or beat's connection pool makes on each connection it hands out
(``DATABASES["default"]["OPTIONS"]["pool"]["check"]``, unless ``DATABASE_POOL_CHECK`` asks for a
round trip every time).

After PostgreSQL restarts, every connection a pool kept idle is dead, and each one failed the
first task that got it: beat's lease reaper and the housekeeping tasks raised OperationalError on
tick after tick, and new runs were refused "not claimed, database unavailable" and retried, for
20 s and more after the database answered again. A round trip on every checkout would catch them,
at the cost of one more round trip per runtime step (a step is one or two round trips:
docs/decisions/0003-runtime-write-path.md).

An idle connection that died with its server has something to read: the server's farewell
("terminating connection due to administrator command") and the end of the stream, or, after a
crash, the end of the stream alone. A healthy idle connection has nothing (this project does not
LISTEN). So the check asks the socket first, without waiting (one ``poll``): only a connection
with something to read gets the round trip, which fails on a dead one, and the pool then drops it
and hands out another, or connects a new one. What a socket cannot show (a network path cut
without a word) is met by the runtime's own handling of a lost connection (core/database.py).
"""

from __future__ import annotations

import select
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool


def check_unless_quiet(conn: psycopg.Connection[Any]) -> None:
    """Raise if ``conn`` is dead; a round trip only when its socket has something to read."""
    if conn.closed:
        raise psycopg.OperationalError("the connection is closed")
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN | select.POLLPRI)
    if poller.poll(0):
        ConnectionPool.check_connection(conn)
