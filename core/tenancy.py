"""The one place that tells PostgreSQL whose rows a transaction may touch.

Row-level security policies (:mod:`core.rls`) read three transaction-local settings:
``app.agency_id`` (the tenant), ``app.all_agencies`` (superusers and platform-wide jobs) and
``app.user_id`` (only to find a user's own membership). They are set here and nowhere else:

* per request by :class:`core.middleware.TenantMiddleware`, from the user's membership;
* per Celery task by :class:`TenantTask`, from the agency of the object the task was enqueued for;
* per websocket message by the consumers, from the connection's authenticated user.

Never from request input. Settings are transaction-local (``set_config(..., true)``), so they
cannot leak to the next user of a pooled connection.
"""

from __future__ import annotations

import contextvars
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from celery import Task
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from psycopg.pq import PipelineStatus, TransactionStatus

from core import in_flight


@dataclass(frozen=True)
class TenantContext:
    agency_id: uuid.UUID | None = None
    all_agencies: bool = False
    user_id: int | None = None


NO_TENANT = TenantContext()
_current: contextvars.ContextVar[TenantContext] = contextvars.ContextVar(
    "agentdesk_tenant", default=NO_TENANT
)


def current() -> TenantContext:
    """The tenant context of the innermost :func:`tenant_context` block of this thread/task."""
    return _current.get()


def current_agency_id() -> uuid.UUID | None:
    return _current.get().agency_id


def _settings(context: TenantContext) -> list[str]:
    """The values of ``_SET_CONFIG``'s three settings for ``context``."""
    return [
        str(context.agency_id) if context.agency_id else "",
        "on" if context.all_agencies else "",
        str(context.user_id) if context.user_id is not None else "",
    ]


def _apply(context: TenantContext, using: str, then: Sequence[str] = ()) -> None:
    connection = connections[using]
    connection.ensure_connection()
    with _led_pipeline(connection, _settings(context), then):
        pass


_SET_CONFIG = (
    "SELECT set_config('app.agency_id', %s, true),"
    " set_config('app.all_agencies', %s, true),"
    " set_config('app.user_id', %s, true)"
)


@contextmanager
def _led_pipeline(
    connection: BaseDatabaseWrapper, arguments: list[str], then: Sequence[str]
) -> Iterator[psycopg.Connection[Any]]:
    """A pipeline led by the tenant settings and ``then`` (and BEGIN, when the transaction has
    not started): what the block queues goes out with them, one round trip, when it ends."""
    raw = connection.connection
    begin = (
        raw.info.transaction_status == TransactionStatus.IDLE
        and not raw.autocommit
        and raw.pgconn.pipeline_status == PipelineStatus.OFF
    )
    if begin:
        # psycopg would send its own BEGIN and, in pipeline mode, wait for its result: a round
        # trip of its own. The connection is idle, so it may go to autocommit while we send
        # BEGIN ourselves; COMMIT or ROLLBACK at the end of Django's atomic block act on the
        # server's transaction either way, and Django sets autocommit back after them.
        raw.autocommit = True
    with connection.wrap_database_errors, raw.cursor() as cursor, raw.pipeline():
        if begin:
            cursor.execute("BEGIN")
        _queue_settings(cursor, arguments, then)
        yield raw


def _queue_settings(cursor: psycopg.Cursor[Any], arguments: list[str], then: Sequence[str]) -> None:
    cursor.execute(_SET_CONFIG, arguments)
    for statement in then:
        cursor.execute(statement)


class _SettingsWithFirstQuery:
    """Django execute wrapper of a deferred block: BEGIN, the tenant settings and ``then`` reach
    the server in the same round trip as the transaction's first query.

    Until that query nothing has run, so nothing can have seen the wrong tenant; a query that
    bypassed Django's cursor would run with no tenant and see no rows (fail closed).
    """

    def __init__(
        self, connection: BaseDatabaseWrapper, arguments: list[str], then: Sequence[str]
    ) -> None:
        self.connection = connection
        self.arguments = arguments
        self.then = then
        self.pending = True

    def __call__(self, execute: Any, sql: Any, params: Any, many: bool, context: Any) -> Any:
        if not self.pending:
            return execute(sql, params, many, context)
        self.pending = False
        raw = self.connection.connection
        if raw.pgconn.pipeline_status != PipelineStatus.OFF:
            # A pipeline opened elsewhere: queue the settings ahead of the query (psycopg then
            # waits for its own BEGIN, a round trip that :func:`pipeline` does not cost).
            with raw.cursor() as cursor:
                _queue_settings(cursor, self.arguments, self.then)
            return execute(sql, params, many, context)
        if many or isinstance(context["cursor"].cursor, psycopg.ServerCursor):
            # Neither goes in a pipeline: the settings take their own round trip first.
            with _led_pipeline(self.connection, self.arguments, self.then):
                pass
            return execute(sql, params, many, context)
        # The pipeline's end waits for all results: the caller finds its query's as usual.
        with _led_pipeline(self.connection, self.arguments, self.then):
            return execute(sql, params, many, context)


@contextmanager
def pipeline(using: str = DEFAULT_DB_ALIAS) -> Iterator[psycopg.Connection[Any]]:
    """The raw connection in pipeline mode, for statements whose results are read after the
    block; in a deferred block that has not queried yet, led by its BEGIN and settings."""
    in_flight.settle()
    connection = connections[using]
    connection.ensure_connection()
    deferred = next(
        (
            wrapper
            for wrapper in connection.execute_wrappers
            if isinstance(wrapper, _SettingsWithFirstQuery) and wrapper.pending
        ),
        None,
    )
    if deferred is None:
        raw = connection.connection
        with connection.wrap_database_errors, raw.pipeline():
            yield raw
        return
    deferred.pending = False
    with _led_pipeline(connection, deferred.arguments, deferred.then) as raw:
        yield raw


# Nothing written, no row locked (both assign a transaction id), no advisory lock held.
_NOTHING_HELD = (
    "SELECT txid_current_if_assigned() IS NULL AND NOT EXISTS ("
    " SELECT 1 FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory')"
)


@contextmanager
def released(using: str = DEFAULT_DB_ALIAS) -> Iterator[bool]:
    """Run the block with no transaction open on this connection, when the current one may be
    ended and begun again without anyone seeing it: a deferred block (the runtime's step
    transaction) that has queried, is inside no savepoint of Django's, has written nothing and
    locks no row. Its transaction is rolled back (it has nothing to keep: at READ COMMITTED
    each query reads its own snapshot anyway), and the next query begins a new one led by the
    same tenant settings and statements (the step's savepoint), as the block's first query did:
    what is written after the block still commits with the step, in one transaction.

    For work that takes long and needs no database (a DuckDB query over loaded tables, a
    sandboxed script): the connection is not left idle in a transaction meanwhile, which would
    pin a PgBouncer server connection and hold back vacuum's horizon. Yields whether it was
    released; when not (a write came first, a test's outer transaction, ...) the block runs
    inside the transaction, as before."""
    connection = connections[using]
    deferred = next(
        (w for w in connection.execute_wrappers if isinstance(w, _SettingsWithFirstQuery)), None
    )
    raw = connection.connection
    can = (
        deferred is not None
        and not deferred.pending
        and connection.in_atomic_block
        # (None: an atomic block that made no savepoint, e.g. the manual transaction mode of a
        # step whose COMMIT stays in flight)
        and not any(connection.savepoint_ids)
        and not connection.needs_rollback
        and raw is not None
        and raw.info.transaction_status == TransactionStatus.INTRANS
        and raw.pgconn.pipeline_status == PipelineStatus.OFF
    )
    if can:
        with connection.cursor() as cursor:
            cursor.execute(_NOTHING_HELD)
            can = bool(cursor.fetchone()[0])
    if not can:
        yield False
        return
    assert deferred is not None  # (checked above)
    with connection.wrap_database_errors:
        raw.rollback()
        # As at the block's start (the first query's pipeline sent BEGIN itself, in autocommit
        # mode): the next query's pipeline sends BEGIN, the settings and ``then`` again.
        raw.autocommit = False
    deferred.pending = True
    yield True


@contextmanager
def tenant_context(
    *,
    agency_id: uuid.UUID | str | None = None,
    all_agencies: bool = False,
    user_id: int | None = None,
    using: str = DEFAULT_DB_ALIAS,
    then: Sequence[str] = (),
    defer: bool = False,
) -> Iterator[TenantContext]:
    """Run the block in a transaction whose queries see one agency (or all, or none).

    Opens ``transaction.atomic`` (a savepoint when nested) and restores the outer context on exit,
    so nested blocks — a platform job acting for one agency, say — behave as expected. ``then``:
    constant statements to run right after the settings, in the same round trip (a savepoint).
    ``defer`` (an outermost block only): send the settings and ``then`` with the block's first
    query through Django's cursor, one round trip fewer (the runtime's step transactions).
    """
    in_flight.settle()  # a commit still in flight on this connection comes first
    context = TenantContext(
        agency_id=uuid.UUID(str(agency_id)) if agency_id else None,
        all_agencies=all_agencies,
        user_id=user_id,
    )
    outer = _current.get()
    token = _current.set(context)
    nested = connections[using].in_atomic_block
    try:
        # savepoint only when nested: an outermost block in Django's manual transaction mode
        # (the runtime's steps whose COMMIT stays in flight) would otherwise open with one.
        with transaction.atomic(using=using, savepoint=nested):
            if defer and not nested:
                connection = connections[using]
                deferred = _SettingsWithFirstQuery(connection, _settings(context), then)
                with connection.execute_wrapper(deferred):
                    yield context
            else:
                _apply(context, using, then)
                yield context
    finally:
        _current.reset(token)
        # Inside an outer transaction (this block was a savepoint) settings of a released
        # savepoint outlive it: put the outer context back, after the savepoint has ended so
        # that a block that failed on a database error has been rolled back first. A top-level
        # block needs nothing: its transaction ended with it.
        connection = connections[using]
        if (
            nested
            and outer != context
            and connection.in_atomic_block
            and not connection.needs_rollback
        ):
            _apply(outer, using)


@contextmanager
def agency_context(
    agency_id: uuid.UUID | str,
    *,
    using: str = DEFAULT_DB_ALIAS,
    then: Sequence[str] = (),
    defer: bool = False,
) -> Iterator[None]:
    """Shorthand: the block sees exactly one agency's rows."""
    with tenant_context(agency_id=agency_id, using=using, then=then, defer=defer):
        yield


def run_in_one_round_trip(
    agency_id: uuid.UUID, statement: str, arguments: list[Any], *, using: str = DEFAULT_DB_ALIAS
) -> tuple[Any, ...] | None:
    """One whole transaction for one agency whose single statement is known in advance (the
    runtime's write of a model reply): the tenant settings and the statement go out in pipeline
    mode and come back in one round trip. Returns the statement's first row. The statement's
    placeholders are PostgreSQL's own (``$1``, ...: a ``psycopg.RawCursor``).

    No BEGIN or COMMIT: on a connection in autocommit mode PostgreSQL runs the statements of a
    pipeline up to its Sync as one implicit transaction, committed at the Sync (and the local
    settings end with it). If the statement fails nothing is committed and the error is raised.
    Precondition: outside any transaction.
    """
    in_flight.settle()
    connection = connections[using]
    if connection.in_atomic_block:
        raise RuntimeError("run_in_one_round_trip() needs the connection outside a transaction")
    connection.ensure_connection()
    raw = connection.connection
    settings = _settings(TenantContext(agency_id=agency_id))
    with (
        connection.wrap_database_errors,
        raw.cursor() as control,
        psycopg.RawCursor(raw) as cursor,
    ):
        try:
            with raw.pipeline():
                control.execute(_SET_CONFIG, settings)
                cursor.execute(statement, arguments)
        except Exception:
            if raw.broken:
                # The server went away: give the connection back (the pool discards a broken
                # one) so that the next caller gets a working one.
                connection.close()
            elif raw.info.transaction_status != TransactionStatus.IDLE:
                # Not expected (the implicit transaction ends at the Sync), but never hand
                # the pool a connection in a transaction.
                raw.execute("ROLLBACK")
            raise
        return cursor.fetchone()


@contextmanager
def platform_context(*, using: str = DEFAULT_DB_ALIAS) -> Iterator[None]:
    """The block sees every agency: superusers' requests, platform jobs (seeding, reaper)."""
    with tenant_context(all_agencies=True, using=using):
        yield


class TenantTask(Task):
    """Celery task base: ``agency_id`` (keyword, required) scopes the whole task to that agency.

    The enqueuer passes the agency of the object the task is for, read from the database; the task
    re-fetches its objects inside the context, so an id from another agency is simply not found.
    """

    # Celery checks the arguments of apply_async against the task function's signature, which
    # has no ``agency_id`` (``__call__`` takes it): beat's every tick of a cron agent was refused
    # with TypeError before it was sent. ``__call__`` checks the one argument it adds.
    typing = False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        agency_id = kwargs.pop("agency_id", None)
        if not agency_id:
            raise TypeError(f"{self.name} needs agency_id=... to set its tenant")
        with agency_context(agency_id):
            return super().__call__(*args, **kwargs)


@contextmanager
def api_key_lookup_context(prefix: str, *, using: str = DEFAULT_DB_ALIAS) -> Iterator[None]:
    """The block may read the one API key whose visible prefix is ``prefix``, and nothing else.

    API-key authentication has to find the key before it knows the agency. No tenant is set here;
    the ``api_key_lookup`` policy on ``core_apikey`` shows exactly the row whose prefix equals
    ``app.api_key_prefix``. The caller checks the secret's hash and then enters the key's agency
    (:mod:`core.api.authentication`). The setting is cleared again on exit.
    """
    with tenant_context(using=using):
        _set_api_key_prefix(prefix, using)
        try:
            yield
        finally:
            if not connections[using].needs_rollback:
                _set_api_key_prefix("", using)


def _set_api_key_prefix(prefix: str, using: str) -> None:
    with connections[using].cursor() as cursor:
        cursor.execute("SELECT set_config('app.api_key_prefix', %s, true)", [prefix])
