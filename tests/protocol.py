"""Counting what goes over the wire to PostgreSQL, from libpq's protocol trace."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection
from psycopg import pq


@contextmanager
def round_trips() -> Iterator[list[int]]:
    """The block's round trips on the default connection: the server's ReadyForQuery messages
    (one per Sync or simple query). The count is appended to the yielded list at the end."""
    connection.ensure_connection()
    pgconn = connection.connection.pgconn
    counted: list[int] = []
    with tempfile.TemporaryFile("w+") as trace:
        pgconn.trace(trace.fileno())
        pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            yield counted
        finally:
            pgconn.untrace()
            trace.seek(0)
            counted.append(
                sum(1 for line in trace if line.split("\t")[::2][:2] == ["B", "ReadyForQuery"])
            )
