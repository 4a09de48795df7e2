"""Inserts for the runtime's hot path without the ORM's per-call query compilation.

``Model.save()`` compiles an INSERT every time (about 1 ms for a wide row here); the runtime
inserts a step and a tool call per ReAct step, so the statement is compiled once per model and
only the values are prepared per row — with the same field conversions (``pre_save``,
``get_db_prep_save``) the ORM applies, so the row is what ``save()`` would have written.
"""

from __future__ import annotations

import contextlib
import itertools
import re
from collections.abc import Sequence
from contextlib import ExitStack
from functools import cache
from typing import Any

import psycopg
from django.db import connections
from django.db.models import DateTimeField, Field, Model
from django.utils import timezone

from core import tenancy

# An INSERT's SQL and its values, ready to run alone or inside a larger statement.
Parts = tuple[str, list[Any]]


@cache
def _insert_sql(model: type[Model]) -> tuple[str, tuple[Field[Any, Any], ...]]:
    fields = tuple(f for f in model._meta.concrete_fields if not f.generated)
    columns = ", ".join(connections["default"].ops.quote_name(str(f.column)) for f in fields)
    placeholders = ", ".join(["%s"] * len(fields))
    table = connections["default"].ops.quote_name(model._meta.db_table)
    return f"INSERT INTO {table} ({columns}) VALUES ({placeholders})", fields  # noqa: S608


@cache
def _row_plan(model: type[Model]) -> tuple[str, tuple[Field[Any, Any], ...], frozenset[str]]:
    sql, fields = _insert_sql(model)
    return sql, fields, frozenset(f.attname for f in fields)


def _sets_now(field: Field[Any, Any]) -> bool:
    return isinstance(field, DateTimeField) and bool(field.auto_now or field.auto_now_add)


def row(model: type[Model], values: dict[str, Any], *, using: str = "default") -> Parts:
    """The INSERT of a new ``model`` row given by field values (attnames, e.g. ``agency_id``),
    without building a model instance (the runtime writes two rows per ReAct step): missing
    fields take their defaults, ``auto_now``/``auto_now_add`` ones the current time, and every
    value goes through its field's ``get_db_prep_save`` — the row ``save()`` would write."""
    sql, fields, names = _row_plan(model)
    if unknown := values.keys() - names:
        raise TypeError(f"{model.__name__} has no field(s) {sorted(unknown)}")
    connection = connections[using]
    now = timezone.now()
    prepared = []
    for field in fields:
        if _sets_now(field):
            value: Any = now
        elif field.attname in values:
            value = values[field.attname]
        else:
            value = field.get_default()
        prepared.append(field.get_db_prep_save(value, connection))
    return sql, prepared


def prepared_row(model: type[Model], values: dict[str, Any]) -> Parts:
    """Like :func:`row`, for values already in the form the database takes (UUIDs, aware
    datetimes, ``Jsonb``, str, int, float, None, lists): every field given, none converted.
    :func:`row` spends ~20 us per row in the fields' conversions; a row written with every
    model reply (flow's decision points) is built here, by a builder that a test holds to
    :func:`row`'s output."""
    sql, fields, _ = _row_plan(model)
    return sql, [values[field.attname] for field in fields]


def execute(parts: Parts, *, using: str = "default") -> None:
    """Run an INSERT from :func:`row` or :func:`insert_parts` in the caller's transaction."""
    sql, values = parts
    with connections[using].cursor() as cursor:
        cursor.execute(sql, values)


def insert_parts(obj: Model, *, using: str = "default") -> Parts:
    """The INSERT of ``obj`` as SQL and values, to run later or inside a larger statement (a
    data-modifying CTE), with the ORM's conversions applied now."""
    sql, fields = _insert_sql(type(obj))
    connection = connections[using]
    values = [f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields]
    obj._state.adding = False
    obj._state.db = using
    return sql, values


def insert(obj: Model, *, using: str = "default") -> Model:
    """INSERT ``obj`` (its primary key must be set, e.g. a UUID default) in the caller's
    transaction. No signals are sent: the runtime's models have none."""
    execute(insert_parts(obj, using=using), using=using)
    return obj


def insert_ctes(inserts: Sequence[str]) -> str:
    """INSERTs' SQL (from :func:`insert_parts` or :func:`row`) as data-modifying CTEs
    ``i0 AS (...), i1 AS (...)`` for one larger statement; their values go in the same order.
    Foreign keys between rows written together must be deferrable (Django creates them so):
    they are checked at commit."""
    return ", ".join(f"i{n} AS ({sql})" for n, sql in enumerate(inserts))


def insert_together(*objs: Model, using: str = "default") -> None:
    """INSERT several rows in one statement: one round trip."""
    parts = [insert_parts(obj, using=using) for obj in objs]
    statement = _together_text(tuple(sql for sql, _ in parts))
    execute_raw(statement, [value for _, values in parts for value in values], using=using)


@cache
def _together_text(inserts: tuple[str, ...]) -> str:
    *first, last = inserts
    return numbered((f"WITH {insert_ctes(first)} " if first else "") + last)


def numbered(statement: str) -> str:
    """``%s`` placeholders as PostgreSQL's own ``$1, $2, ...``, for :func:`execute_raw`: its
    text is then final, where psycopg would rewrite a ``%s`` query on every call (it caches
    that only up to 50 parameters; the runtime's multi-row statements have more)."""
    numbers = itertools.count(1)
    return _PLACEHOLDER.sub(lambda _: f"${next(numbers)}", statement)


_PLACEHOLDER = re.compile("%s")


def execute_raw(
    statement: str, values: list[Any], *, commit: bool = False, using: str = "default"
) -> Any:
    """Run a :func:`numbered` statement in the caller's transaction (led by a deferred tenant
    block's settings if they are still to be sent); returns its first row, if any. ``commit``:
    COMMIT the transaction in the same round trip (the caller's outermost atomic block then
    finds nothing to commit and runs its on-commit hooks as usual)."""
    connection = connections[using]
    connection.ensure_connection()
    with connection.wrap_database_errors, psycopg.RawCursor(connection.connection) as cursor:
        with tenancy.pipeline(using) as raw:
            cursor.execute(statement, values)
            if commit:
                raw.execute("COMMIT")
        return cursor.fetchone() if cursor.description else None


class SentCommit:
    """A statement and the COMMIT of its transaction, sent and executing on the server while
    the caller goes on (:func:`send_with_commit`); :meth:`result` waits for them. Until then
    the connection's pipeline stays open and nothing else may use the connection."""

    def __init__(self, using: str, pipeline: ExitStack, cursor: psycopg.RawCursor[Any]) -> None:
        self._using = using
        self._pipeline = pipeline
        self._cursor = cursor

    def result(self) -> Any:
        """The statement's first row, once the COMMIT is done; raises what either raised."""
        connection = connections[self._using]
        try:
            with connection.wrap_database_errors:
                self._pipeline.close()  # Sync: the results come back, errors are raised
                return self._cursor.fetchone() if self._cursor.description else None
        finally:
            self._cursor.close()

    def abandon(self) -> None:
        """End the pipeline without reading the outcome (the caller is failing anyway)."""
        with contextlib.suppress(Exception):
            self._pipeline.close()
        self._cursor.close()


def send_with_commit(statement: str, values: list[Any], *, using: str = "default") -> SentCommit:
    """Send a :func:`numbered` statement and COMMIT its transaction (the caller's outermost) in
    pipeline mode, without waiting: PostgreSQL runs both, the durable flush included, while the
    caller works; :meth:`SentCommit.result` collects the outcome. Led by a deferred tenant
    block's settings if they are still to be sent, like :func:`execute_raw`."""
    connection = connections[using]
    connection.ensure_connection()
    cursor = psycopg.RawCursor(connection.connection)
    pipeline = ExitStack()
    try:
        with connection.wrap_database_errors:
            raw = pipeline.enter_context(tenancy.pipeline(using))
            cursor.execute(statement, values)
            raw.execute("COMMIT")
    except BaseException as exc:
        pipeline.__exit__(type(exc), exc, exc.__traceback__)  # ends the pipeline, keeps `exc`
        cursor.close()
        raise
    return SentCommit(using, pipeline, cursor)
