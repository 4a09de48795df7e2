"""The step transaction: one transaction, one commit per model reply or tool result, fenced by
the lease (docs/decisions/0003-runtime-write-path.md). Each step ends with one statement: the
step's rows inserted as CTEs of an UPDATE of the execution row ``WHERE lease_owner = <this
worker>``; a worker whose lease was taken over matches no row, the statement raises (SQLSTATE
AD001) and :class:`LeaseLost` is raised. A model reply's whole transaction is one round trip
(:func:`direct_step`); a tool result's COMMIT may stay in flight until the next model request
(:mod:`agents.runtime.store.deferred_commit`).
"""

from __future__ import annotations

import datetime
import functools
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any, NoReturn

from django.conf import settings
from django.db import DatabaseError, connection
from django.db.models import Model
from django.utils import timezone
from psycopg.types.json import Jsonb

from agents.lifecycle import broadcasting, finish_execution, protocol, record_transition
from agents.llm import Usage
from agents.models import Execution, ExecutionStatus, ExecutionStep
from agents.runtime.store.deferred_commit import (
    CommitInFlight,
    end_manual,
    roll_back_manual,
    settle_in_flight,
)
from core import fastdb, tenancy

# Columns the step UPDATE may write; JSON ones need psycopg's Jsonb wrapper in raw SQL.
_UPDATABLE = (
    "status", "stop_reason", "current_step", "sequence", "tokens_input", "tokens_output",
    "tokens_cache_read", "tokens_cache_write", "tokens_total", "cost_usd", "llm_call_count",
    "tool_call_count", "lease_owner", "lease_expires_at", "output", "error", "error_details",
    "completed_at", "duration_ms", "wait_until", "input_request", "attempts", "started_at",
    "config_snapshot", "budget_reservation", "result", "agent_version_id",
)  # fmt: skip
_JSON_COLUMNS = frozenset(
    {"error_details", "input_request", "config_snapshot", "budget_reservation", "result"}
)


class LeaseLost(Exception):
    """Another delivery owns the run now; this worker must stop without writing."""


def lease_deadline() -> datetime.datetime:
    return timezone.now() + datetime.timedelta(seconds=settings.AGENTDESK_LEASE_SECONDS)


# Raised by agentdesk_lease_lost() (migration agents 0004) when the fenced UPDATE matches nothing.
LEASE_LOST_SQLSTATE = "AD001"


class StepTransaction:
    """Collects one step's writes; :func:`step_transaction` commits them with the lease check."""

    def __init__(
        self, execution: Execution, worker: str, *, fenced: bool = True, direct: bool = False
    ) -> None:
        self.execution = execution
        self.worker = worker
        # Written by direct_step() outside Django's transaction management: its broadcasts wait
        # here for the commit instead of in Django's on-commit hooks.
        self.after_commit: list[Callable[[], None]] | None = [] if direct else None
        # A claim holds the row lock instead: its UPDATE is what sets the lease.
        self.fenced = fenced
        self.changed: set[str] = {"current_step", "sequence", "lease_expires_at"}
        self.finished = False
        self.parked = False
        # Rows written with the execution's fenced UPDATE, in one statement (_step_statement).
        self.inserts: list[fastdb.Parts] = []
        # step_transaction(commit_later=True) sent the statement and COMMIT, not yet collected.
        self.commit_sent = False

    def defer_insert(self, obj: Model) -> None:
        """Insert ``obj`` together with this step's execution UPDATE (one round trip)."""
        self.inserts.append(fastdb.insert_parts(obj))

    def defer_row(self, parts: fastdb.Parts) -> None:
        """Like :meth:`defer_insert`, for a row built with :func:`core.fastdb.row`."""
        self.inserts.append(parts)

    def save(self) -> None:
        """Write the collected rows and the execution's changed columns in one statement: the
        whole transaction in one round trip for a direct step, else with the COMMIT of the
        outermost transaction riding along. A run still going renews its lease."""
        statement, arguments = self._statement()
        try:
            if self.after_commit is not None:
                row = tenancy.run_in_one_round_trip(self.execution.agency_id, statement, arguments)
            else:
                # With the COMMIT in the same round trip when this is the outermost
                # transaction; nested in a caller's (tests), the caller commits.
                row = fastdb.execute_raw(statement, arguments, commit=_outermost_transaction())
        except DatabaseError as exc:
            self.raise_failed(exc)
        self.saved(row)

    def _statement(self) -> fastdb.Parts:
        execution = self.execution
        if self.fenced and not self.finished and not self.parked:
            execution.lease_expires_at = lease_deadline()
        return _step_statement(
            execution, self.worker if self.fenced else None, sorted(self.changed), self.inserts
        )

    def raise_failed(self, exc: DatabaseError) -> NoReturn:
        """The step's statement failed: :class:`LeaseLost` if the fence stopped it."""
        if getattr(exc.__cause__, "sqlstate", None) == LEASE_LOST_SQLSTATE:
            raise LeaseLost(
                f"execution {self.execution.id}: lease no longer held by {self.worker}"
            ) from exc
        raise exc

    def saved(self, row: tuple[Any, ...] | None) -> None:
        """The step's statement committed, returning ``row``."""
        assert row is not None
        self.execution.cancel_requested_at = row[0]
        for callback in self.after_commit or ():
            callback()

    def add_step(self, step_type: str, *, step_id: uuid.UUID | None = None, **fields: Any) -> None:
        """The next step's row (``fields``: ExecutionStep fields), written by :meth:`save`."""
        execution = self.execution
        execution.current_step += 1
        execution.sequence += 1
        values = {
            "id": step_id or uuid.uuid4(),
            "agency_id": execution.agency_id,
            "execution_id": execution.id,
            "step_number": execution.current_step,
            "step_type": step_type,
            "sequence": execution.sequence,
            **fields,
        }
        self.defer_row(fastdb.row(ExecutionStep, values))
        broadcasting.broadcast(execution, "step", protocol.step_data(values), self.after_commit)

    def count_llm_call(self, usage: Usage, cost: Decimal) -> None:
        execution = self.execution
        execution.tokens_input += usage.input_tokens
        execution.tokens_output += usage.output_tokens
        execution.tokens_cache_read += usage.cache_read_tokens
        execution.tokens_cache_write += usage.cache_write_tokens
        execution.tokens_total += usage.total_tokens
        execution.cost_usd += cost
        execution.llm_call_count += 1
        self.changed |= {
            "tokens_input", "tokens_output", "tokens_cache_read", "tokens_cache_write",
            "tokens_total", "cost_usd", "llm_call_count",
        }  # fmt: skip

    def count_tool_call(self) -> None:
        self.execution.tool_call_count += 1
        self.changed.add("tool_call_count")

    def park(
        self,
        status: str,
        *,
        reason: str,
        wait_until: datetime.datetime | None = None,
        input_request: dict[str, Any] | None = None,
    ) -> None:
        """The run waits (approval, input, a timer) and gives up its worker and lease."""
        execution = self.execution
        record_transition(execution, status, reason=reason, triggered_by="parked", tx=self)
        execution.lease_owner = ""
        execution.wait_until = wait_until
        execution.input_request = input_request or {}
        self.changed |= {"status", "lease_owner", "wait_until", "input_request"}
        self.parked = True

    def hand_back(self, *, reason: str) -> None:
        """The run goes back to pending for another worker (this one is draining): its lease
        released with this step's commit, so the next delivery claims it at once. A pending
        run with a ``started_at`` is claimed as a resume: no new attempt, no retry."""
        execution = self.execution
        record_transition(
            execution,
            ExecutionStatus.PENDING,
            reason=reason,
            triggered_by="worker_draining",
            tx=self,
        )
        execution.lease_owner = ""
        self.changed |= {"status", "lease_owner"}
        self.parked = True  # (the lease is not renewed)

    def finish(
        self,
        status: str,
        *,
        stop_reason: str,
        output: str = "",
        error: str = "",
        error_details: dict[str, Any] | None = None,
    ) -> None:
        finish_execution(
            self.execution,
            status=status,
            stop_reason=stop_reason,
            output=output,
            error=error,
            error_details=error_details,
            tx=self,
            by_worker=self.fenced,  # a claim's end (fenced=False) may find decisions pending
        )
        self.changed |= {
            "status", "stop_reason", "output", "error", "error_details", "completed_at",
            "duration_ms", "lease_owner", "wait_until", "budget_reservation",
        }  # fmt: skip
        self.finished = True


@contextmanager
def step_transaction(
    execution: Execution, worker: str, *, savepoint: str | None = None, commit_later: bool = False
) -> Iterator[StepTransaction]:
    """One transaction, one commit: the body's writes plus the fenced execution UPDATE.

    Sets ``cancel_requested`` on the execution object from the row as committed. ``savepoint``
    is created in the transaction's first round trip (a tool handler's writes roll back to it).

    ``commit_later`` (a tool result the run goes on from with a model call): unless the step
    ends or parks the run, its statement and COMMIT are sent and the block ends without
    waiting for them — PostgreSQL executes and flushes them while the runtime builds the next
    model request. The commit is then *in flight* (``tx.commit_sent``) until
    :func:`settle_in_flight` collects it: the runtime does so just before the request goes out
    (or before anything else uses the database: every entry point here settles first, and so
    does any query through Django meanwhile). Only then are the row's cancel flag known and the
    step's on-commit hooks run, and a failure (a lost lease) raised. Inside a caller's
    transaction (tests) the step commits as usual.
    """
    settle_in_flight()
    then = [f"SAVEPOINT {savepoint}"] if savepoint else []
    if not commit_later or connection.in_atomic_block:
        # The settings and savepoint go with the first query: the tool handler's, or else the
        # step's own statement (one round trip for the whole transaction).
        with tenancy.agency_context(execution.agency_id, then=then, defer=True):
            tx = StepTransaction(execution, worker)
            yield tx
            tx.save()
        return
    # Django's manual transaction mode: the tenant block's atomic then neither commits nor
    # turns autocommit back on when it ends, so the COMMIT can stay in flight past it. The
    # transaction is ended here (end_manual) or by the in-flight commit's settle().
    connection.set_autocommit(False)
    sent: fastdb.SentCommit | None = None
    try:
        with tenancy.agency_context(execution.agency_id, then=then, defer=True):
            tx = StepTransaction(execution, worker)
            yield tx
            if tx.finished or tx.parked:
                tx.save()
            else:
                try:
                    sent = fastdb.send_with_commit(*tx._statement())
                except DatabaseError as exc:
                    # The statement's error came back while the COMMIT was being sent (psycopg
                    # reads what has arrived): the failure settle() would have raised.
                    tx.raise_failed(exc)
        if sent is not None:  # (after the tenant block, which pops its own execute wrapper)
            CommitInFlight(tx, sent)
            tx.commit_sent = True
    except BaseException:
        if sent is not None and not tx.commit_sent:
            sent.abandon()
        roll_back_manual()
        raise
    if sent is None:
        end_manual()


@contextmanager
def direct_step(execution: Execution, worker: str) -> Iterator[StepTransaction]:
    """A step whose writes are all known in Python (a model reply that is not the last): the
    body only adds rows and counters, then the tenant settings and the step's one statement
    reach the database together and commit at the pipeline's Sync — one round trip and one
    commit per model reply (:func:`core.tenancy.run_in_one_round_trip`).

    The body must not query the database; inside a caller's transaction (tests) this is an
    ordinary :func:`step_transaction`.
    """
    if connection.in_atomic_block:
        with step_transaction(execution, worker) as tx:
            yield tx
        return
    tx = StepTransaction(execution, worker, direct=True)
    yield tx
    tx.save()


def _step_statement(
    execution: Execution,
    worker: str | None,
    columns: list[str],
    inserts: list[fastdb.Parts],
) -> fastdb.Parts:
    """The step's one statement, with PostgreSQL's own ``$n`` placeholders (run on a
    ``psycopg.RawCursor``): its text is built once per shape, and psycopg has no query to
    rewrite per call (it caches that only up to 50 parameters; a tool step has more)."""
    values: list[Any] = []
    for column in columns:
        assert column in _UPDATABLE, column
        value = getattr(execution, column)
        values.append(Jsonb(value) if column in _JSON_COLUMNS and value is not None else value)
    statement = _statement_text(
        tuple(columns), tuple(sql for sql, _ in inserts), fenced=worker is not None
    )
    arguments = [value for _, row in inserts for value in row]
    arguments += [*values, execution.id, *([worker] if worker is not None else []), execution.id]
    return statement, arguments


@functools.cache
def _statement_text(columns: tuple[str, ...], inserts: tuple[str, ...], *, fenced: bool) -> str:
    assignments = ", ".join(f"{column} = %s" for column in columns)
    # The step's rows ride along as data-modifying CTEs: one statement. When the UPDATE matches
    # nothing the statement raises (agentdesk_lease_lost), which aborts the whole transaction
    # on the server. A claim (not fenced) holds the row lock instead: its UPDATE sets the lease.
    ctes = fastdb.insert_ctes(inserts)
    text = (
        f"WITH {ctes + ', ' if ctes else ''}"  # noqa: S608 - model-generated SQL, values are params
        f"u AS (UPDATE agents_execution SET {assignments}, updated_at = now()"
        f" WHERE id = %s{' AND lease_owner = %s' if fenced else ''}"
        " RETURNING cancel_requested_at)"
        " SELECT cancel_requested_at FROM u"
        " UNION ALL SELECT agentdesk_lease_lost(%s) WHERE NOT EXISTS (SELECT FROM u)"
    )  # column and table names are constants of this module and the models, never input
    return fastdb.numbered(text)


def _outermost_transaction() -> bool:
    return len(connection.atomic_blocks) == 1 and not connection.needs_rollback
