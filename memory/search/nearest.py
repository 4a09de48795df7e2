"""The nearest neighbours of a vector among the rows of one search (an agent's memories or
episodes, with their filters), as many as match up to the number asked for, whatever the plan.

Exact first: the distance of every matching row, read through the B-tree on (agency, agent, ...)
and capped at ``AGENTDESK_MEMORY_EXACT_SEARCH_MAX_ROWS`` + 1 rows, in a MATERIALIZED CTE that no
plan, custom or generic (prepared), can replace with the approximate index. Fewer rows than the
cap: that is the answer. More: HNSW with pgvector 0.8's iterative scan (``relaxed_order``,
``hnsw.ef_search`` 40) under ``enable_sort = off`` (:func:`steered_planner`), where every plan but
the index's ordered scan carries a sort and loses; a process remembers such large searches for a
few minutes and goes to the index directly. An index scan that comes back with fewer rows than
asked for (``hnsw.max_scan_tuples`` reached, or fewer rows than remembered) is redone exactly.
The threshold and ef_search are bench/README.md's "Memory search" measurements.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection

logger = logging.getLogger(__name__)

# hnsw.ef_search of the iterative scan: 40 (pgvector's default) recalled 0.97-0.98 of the exact
# ten nearest from 3,000 to 50,000 rows per agent; 100 no more (bench/README.md).
EF_SEARCH = 40
LARGE_MEMO_SECONDS = 300.0
LARGE_MEMO_ENTRIES = 10_000


def exact_search_max_rows() -> int:
    return int(settings.AGENTDESK_MEMORY_EXACT_SEARCH_MAX_ROWS)


def vector_literal(vector: Sequence[float]) -> str:
    return "[" + ",".join(repr(float(value)) for value in vector) + "]"


def nearest(
    table: str,
    where: str,
    params: list[Any],
    vector: Sequence[float],
    limit: int,
    *,
    size_key: Hashable,
) -> list[uuid.UUID]:
    """The ids of the ``limit`` rows of ``table`` matching ``where`` nearest to ``vector``
    (cosine), as many as match up to ``limit``: exact for few rows, HNSW for many.

    ``size_key`` names the search's rows (agent, model, filters) for the memo of large ones."""
    threshold = exact_search_max_rows()
    literal = vector_literal(vector)
    if not _sizes.is_large(size_key):
        # Exact, reading at most threshold + 1 rows: the answer when that many do not match;
        # otherwise the rows are many and the index is used (and the memo skips this read
        # for a while).
        found, matching = _nearest_exact(table, where, params, literal, limit, cap=threshold + 1)
        if matching <= threshold:
            return found
        _sizes.remember_large(size_key)
    found = _nearest_hnsw(table, where, params, literal, limit)
    if len(found) >= limit:
        return found
    # Fewer rows than asked for: the scan stopped early (hnsw.max_scan_tuples) or the rows are
    # fewer than the memo says. The exact scan is right either way.
    logger.info("HNSW scan returned %d of %d rows: exact search instead", len(found), limit)
    _sizes.forget(size_key)
    return _nearest_exact(table, where, params, literal, limit, cap=None)[0]


def _nearest_exact(
    table: str, where: str, params: list[Any], literal: str, limit: int, *, cap: int | None
) -> tuple[list[uuid.UUID], int]:
    """(the nearest ids, how many rows matched, up to ``cap``). With a cap, the ids are the
    nearest only if fewer than ``cap`` rows matched."""
    # MATERIALIZED: the ORDER BY is over the CTE's rows, which no index can provide, so the
    # planner cannot choose the (approximate, post-filtered) HNSW scan, prepared or not.
    sql = (
        f"WITH scored AS MATERIALIZED (SELECT id, embedding <=> %s::vector AS distance"  # noqa: S608 - constant table and clauses; values are parameters
        f" FROM {table} WHERE {where}{' LIMIT %s' if cap is not None else ''})"
        " SELECT id, (SELECT count(*) FROM scored) FROM scored ORDER BY distance, id LIMIT %s"
    )
    arguments = [literal, *params, *([cap] if cap is not None else []), limit]
    with connection.cursor() as cursor:
        cursor.execute(sql, arguments)
        rows = cursor.fetchall()
    return [row[0] for row in rows], (rows[0][1] if rows else 0)


class _SizeMemo:
    """Which searches (agent, model, filters) matched more rows than the exact path takes, for
    ``LARGE_MEMO_SECONDS``: their next searches go to the index without reading the capped
    exact scan first. Only a shortcut: a memo gone stale costs one HNSW scan that finds too few
    rows, then the exact one (:func:`nearest`). Per process."""

    def __init__(self) -> None:
        self._until: dict[Hashable, float] = {}
        self._lock = threading.Lock()

    def is_large(self, key: Hashable) -> bool:
        with self._lock:
            until = self._until.get(key)
            if until is None:
                return False
            if until < time.monotonic():
                del self._until[key]
                return False
            return True

    def remember_large(self, key: Hashable) -> None:
        with self._lock:
            if len(self._until) >= LARGE_MEMO_ENTRIES:
                self._until.clear()
            self._until[key] = time.monotonic() + LARGE_MEMO_SECONDS

    def forget(self, key: Hashable) -> None:
        with self._lock:
            self._until.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._until.clear()


_sizes = _SizeMemo()


def clear_size_memo() -> None:
    _sizes.clear()


def _nearest_hnsw(
    table: str, where: str, params: list[Any], literal: str, limit: int
) -> list[uuid.UUID]:
    """Precondition: inside :func:`steered_planner` (the iterative scan, no sort plans)."""
    sql = (
        f"SELECT id FROM {table} WHERE {where}"  # noqa: S608 - constant table and clauses; values are parameters
        " ORDER BY embedding <=> %s::vector LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, literal, limit])
        return [row[0] for row in cursor.fetchall()]


@contextmanager
def steered_planner() -> Iterator[None]:
    """The block's queries run with ``enable_sort = off`` (a plan that can read an index in
    order wins over one that sorts: the HNSW scan over a sort of the agent's rows, the
    importance B-tree over a bitmap scan and sort) and pgvector's iterative scan; the settings
    are put back after it.

    Transaction-local settings would last to the end of the caller's transaction: the old
    values are read (in a subquery, evaluated before the outer SELECT sets the new ones) and
    set again on the way out. Not a savepoint rolled back instead: psycopg drops every prepared
    statement of the connection on a ROLLBACK.
    """
    with connection.cursor() as cursor:
        cursor.execute(_STEER, [str(EF_SEARCH)])
        old = list(cursor.fetchone()[:3])
    try:
        yield
    except BaseException:
        # After a database error the transaction is aborted (and the settings end with it).
        with contextlib.suppress(DatabaseError), connection.cursor() as cursor:
            cursor.execute(_RESTORE, old)
        raise
    with connection.cursor() as cursor:
        cursor.execute(_RESTORE, old)


_STEER = (
    "SELECT old.sort, old.iterative, old.ef,"
    " set_config('enable_sort', 'off', true),"
    " set_config('hnsw.iterative_scan', 'relaxed_order', true),"
    " set_config('hnsw.ef_search', %s, true)"
    " FROM (SELECT current_setting('enable_sort') AS sort,"
    " current_setting('hnsw.iterative_scan', true) AS iterative,"
    " current_setting('hnsw.ef_search', true) AS ef OFFSET 0) AS old"
)
_RESTORE = (
    "SELECT set_config('enable_sort', %s, true),"
    " set_config('hnsw.iterative_scan', %s, true),"
    " set_config('hnsw.ef_search', %s, true)"
)
