"""Persistence of a run: claiming with a lease, one transaction (one commit) per model reply or
tool result, and the end of a run. Every write of the loop goes through here.

Fencing: each step transaction ends with one statement — the step's rows inserted as CTEs of an
UPDATE of the execution row ``WHERE lease_owner = <this worker>``. A worker whose lease was taken
over (it stalled, the reaper handed the run to another delivery) matches no row; the statement then
raises (SQLSTATE AD001), the transaction rolls back and :class:`LeaseLost` is raised. The same
UPDATE renews the lease and returns ``cancel_requested_at``, so neither costs a round trip of its
own, and because the failure is an error rather than a row count the COMMIT travels with the
statement. A model reply's whole transaction is one round trip (:func:`direct_step`); see
docs/decisions/0003-runtime-write-path.md.
"""

from __future__ import annotations

import datetime
import functools
import itertools
import logging
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal, NoReturn

from django.conf import settings
from django.db import DatabaseError, Error, connection
from django.db.models import Model
from django.utils import timezone
from psycopg.types.json import Jsonb

from agents import after_run
from agents.llm import Usage
from agents.models import (
    Execution,
    ExecutionStatus,
    ExecutionStep,
    StateTransition,
    TransitionType,
    TriggerType,
)
from agents.runtime.states import can_transition
from core import fastdb, in_flight, realtime, tenancy
from core.events import emitted_by_run, event_emit
from core.exceptions import ApplicationError
from core.models import ActorType
from live import protocol
from ops import metrics

logger = logging.getLogger(__name__)

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


def _broadcast(
    execution: Execution,
    kind: Literal["step", "status"],
    data: protocol.StepData | protocol.StatusData,
    deferred: list[Callable[[], None]] | None = None,
) -> None:
    """Every event to the execution's page; status changes also to the agency dashboard. Sent
    when the transaction commits: by Django's on-commit hooks, or by whoever runs ``deferred``.
    The payload is the protocol's (live/protocol.py), the one a catch-up reads back."""
    message: protocol.ExecutionEvent = {
        "type": protocol.GROUP_EVENT,
        "kind": kind,
        "seq": execution.sequence,
        "execution_id": str(execution.id),
        "agent_id": str(execution.agent_id),
        "status": execution.status,
        "data": data,
    }
    groups = [realtime.execution_group(execution.id)]
    if kind == "status":
        groups.append(realtime.agency_group(execution.agency_id))
    if deferred is not None:
        deferred.append(lambda: realtime.broadcast(groups, dict(message)))
    else:
        realtime.broadcast_on_commit(groups, dict(message))


def record_transition(
    execution: Execution,
    to_status: str,
    *,
    reason: str,
    transition_type: str = TransitionType.NORMAL,
    triggered_by: str = "",
    metadata: dict[str, Any] | None = None,
    created: bool = False,
    tx: StepTransaction | None = None,
    collect: list[Model] | None = None,
) -> StateTransition:
    """Write one state change (seed 003) and set ``execution.status``; the caller saves the row.
    ``created`` records a new run's first state (from nothing); its row may be handed to
    ``collect`` for the caller to insert with the execution. Otherwise the state left gets its
    ``exited_at`` and ``duration_ms``, and the rows are written at once or with ``tx``'s
    statement.

    Precondition: inside the execution's agency transaction.
    """
    from_status = "" if created else execution.status
    if not created and not can_transition(from_status, to_status):
        raise ApplicationError(
            "invalid_transition",
            f"An execution cannot go from {from_status} to {to_status}.",
            status=409,
        )
    execution.sequence += 1
    execution.status = to_status
    transition = StateTransition(
        agency_id=execution.agency_id,
        execution_id=execution.id,
        from_state=from_status,
        to_state=to_status,
        sequence=execution.sequence,
        transition_reason=reason,
        transition_type=transition_type,
        triggered_by_event=triggered_by,
        event_metadata=metadata or {},
    )
    if collect is not None:
        assert created, "only a new run's first state is inserted by the caller"
        collect.append(transition)
    elif tx is None:
        if not created:
            fastdb.execute(_close_state(execution, transition.entered_at))
        fastdb.insert(transition)
    else:
        if not created:
            tx.defer_row(_close_state(execution, transition.entered_at))
        tx.defer_insert(transition)
    _broadcast(
        execution,
        "status",
        protocol.status_data(from_status=from_status, to_status=to_status, reason=reason),
    )
    return transition


def _close_state(execution: Execution, at: datetime.datetime) -> fastdb.Parts:
    """The UPDATE that ends the execution's current state at ``at`` (seed 003's exited_at and
    duration_ms): the open transition row, the one no later change has closed."""
    return _CLOSE_STATE_SQL, [at, at, INT4_MAX, execution.id]


# Durations are int4 columns: one longer than ~24.8 days (an approval nobody decides, a run
# that waited that long) is recorded as the maximum rather than failing the write that ends it.
INT4_MAX = 2**31 - 1
_CLOSE_STATE_SQL = (
    "UPDATE agents_statetransition SET exited_at = %s,"
    " duration_ms = least(greatest(0, round(extract(epoch FROM %s - entered_at) * 1000)), %s)"
    " WHERE execution_id = %s AND exited_at IS NULL"
)


# Pending, or running but unowned: the reaper released a dead worker's lease, or it ran out.
# (Columns named, not *: a prepared statement must not change its result type under a migration.)
_CLAIMABLE = (
    "agents_execution WHERE id = %s AND (status = 'pending' OR (status = 'running'"
    " AND (lease_owner = '' OR lease_expires_at IS NULL OR lease_expires_at < now())))"
)
_CLAIM_LOCKED_SQL = (
    f"SELECT {', '.join(str(f.column) for f in Execution._meta.concrete_fields)}"  # noqa: S608
    f" FROM {_CLAIMABLE} FOR UPDATE"
)
_CLAIM_SQL = f"{_CLAIM_LOCKED_SQL} SKIP LOCKED"


# The claim's condition alone, read without a lock: is the row claimable but locked by someone?
_CLAIMABLE_SQL = f"SELECT 1 FROM {_CLAIMABLE}"  # noqa: S608 - constant
# Seconds a delivery waits for a claimable run's row lock before it gives up and is retried.
CLAIM_LOCK_TIMEOUT = "5s"


def _claim_after_lock(execution_id: uuid.UUID | str) -> Execution | None:
    """SKIP LOCKED found nothing. Usually the run is not ours to take (it ended, waits, or its
    holder is alive); but a claimable run may just be locked for a moment by someone who is not
    claiming it (say, the other clicks of an approval, which lock the run before they find it
    decided): skipping it then would drop this delivery and leave the run pending until the
    reaper. So wait for the lock, with a limit, and test the condition again once we hold it
    (PostgreSQL re-checks it on the row as the lock holder left it). A timeout raises
    LockNotAvailable, a transient error: the run task is retried."""
    with connection.cursor() as cursor:
        cursor.execute(_CLAIMABLE_SQL, [execution_id])
        if cursor.fetchone() is None:
            return None
        cursor.execute(f"SET LOCAL lock_timeout = '{CLAIM_LOCK_TIMEOUT}'")
    claimed = next(iter(Execution.objects.raw(_CLAIM_LOCKED_SQL, [execution_id])), None)
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL lock_timeout TO DEFAULT")
    return claimed


@dataclass
class Claim:
    execution: Execution
    first_claim: bool
    # The claim's writes (transition, lease, and the caller's first-claim rows): saved by
    # ``tx.save()`` in one statement, committed with the caller's transaction.
    tx: StepTransaction


def claim(execution_id: uuid.UUID | str, *, worker: str) -> Claim | None:
    """Take the run for this worker: a pending run, or a running one whose lease ran out.

    Returns ``None`` when the run is not ours to take (another worker holds it, it waits, or it
    ended) — a duplicate delivery then exits without work.
    Precondition: inside the execution's agency context (the caller's transaction).
    """
    execution = next(iter(Execution.objects.raw(_CLAIM_SQL, [execution_id])), None)
    if execution is None:
        execution = _claim_after_lock(execution_id)
        if execution is None:
            return None
    tx = StepTransaction(execution, worker, fenced=False)
    first_claim = execution.started_at is None
    crash_resume = execution.status == ExecutionStatus.RUNNING
    if crash_resume:
        # The reaper releases (owner "") the runs of a worker gone by its heartbeat; a run
        # still owned here was taken because its lease ran out.
        released = execution.lease_owner == ""
        record_transition(
            execution,
            ExecutionStatus.RUNNING,
            reason=f"resumed by {worker} after "
            + ("its worker was lost" if released else "the previous lease expired"),
            transition_type=TransitionType.RETRY,
            triggered_by="worker_lost" if released else "lease_expired",
            tx=tx,
        )
    else:
        record_transition(
            execution,
            ExecutionStatus.RUNNING,
            reason=f"claimed by {worker}",
            tx=tx,
        )
    execution.lease_owner = worker
    execution.lease_expires_at = lease_deadline()
    if first_claim or crash_resume:
        # Deliveries that had to start or restart the work; a resume after an approval or a
        # wait is the run going on, not another attempt.
        execution.attempts += 1
    execution.started_at = execution.started_at or timezone.now()
    tx.changed |= {"status", "lease_owner", "attempts", "started_at"}
    if release_budget_reservation(execution):  # a lost worker's model call left it
        tx.changed.add("budget_reservation")
    return Claim(execution, first_claim, tx)


def record_budget_reservation(
    execution: Execution, worker: str, *, budget_id: uuid.UUID, amount: Decimal
) -> None:
    """Note the reservation just made for this worker's model call on the run's row, in the
    reservation's transaction (fenced: a worker that lost the run rolls both back).
    Precondition: in the agency's transaction."""
    execution.budget_reservation = {"budget_id": str(budget_id), "amount": str(amount)}
    noted = Execution.objects.filter(pk=execution.pk, lease_owner=worker).update(
        budget_reservation=execution.budget_reservation
    )
    if not noted:
        raise LeaseLost(f"execution {execution.id}: lease no longer held by {worker}")


def release_budget_reservation(execution: Execution, *, holder: str | None = None) -> bool:
    """Give back the reservation of a model call whose cost will never be known (its worker was
    lost, the call failed, or the run ended meanwhile); the caller writes ``budget_reservation``
    (cleared). ``holder``: the worker whose call it was, which clears the row itself and gives
    the reservation back only while it still holds the run: if its lease ran out during the
    call, the delivery that claimed the run has given it back already (and the row may hold
    that delivery's own by now). True if given back. Precondition: in the agency's transaction.
    """
    held = execution.budget_reservation
    if not held:
        return False
    execution.budget_reservation = None
    if holder is not None:
        still_held = Execution.objects.filter(
            pk=execution.pk, lease_owner=holder, budget_reservation__isnull=False
        ).update(budget_reservation=None)
        if not still_held:
            return False
    from usage.services import budget_settle  # noqa: PLC0415 - usage depends on agents

    budget_settle(
        budget_id=uuid.UUID(held["budget_id"]), reserved=Decimal(held["amount"]), cost=Decimal(0)
    )
    return True


def running_seconds(execution: Execution, steps: Sequence[ExecutionStep]) -> float:
    """How long the run has been ``running`` before its latest claim (from its transitions and
    ``steps``, its persisted steps): what its ``timeout_seconds`` has used. Time spent waiting
    for an approval, an answer or a timer does not count. Nor does the time a lost worker's
    run lay unowned until its lease ran out (minutes, by default longer than a run may take):
    a worker's time ends at its last persisted step when another delivery took the run over.

    Precondition: inside the execution's agency context.
    """
    transitions = list(
        StateTransition.objects.filter(execution_id=execution.id)
        .order_by("sequence")
        .values_list("to_state", "transition_type", "entered_at")
    )
    done = [step.completed_at for step in steps if step.completed_at is not None]
    used = 0.0
    # The latest claim's interval is still open: the caller's clock counts it.
    for (state, _, entered), (_, how, next_entered) in itertools.pairwise(transitions):
        if state != ExecutionStatus.RUNNING:
            continue
        left = next_entered
        if how == TransitionType.RETRY:  # taken over after the worker was lost
            left = max((at for at in done if entered <= at <= next_entered), default=entered)
        used += (left - entered).total_seconds()
    return used


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
        _broadcast(execution, "step", protocol.step_data(values), self.after_commit)

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
    # transaction is ended here (_end_manual) or by the in-flight commit's settle().
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
            _CommitInFlight(tx, sent)
            tx.commit_sent = True
    except BaseException:
        if sent is not None and not tx.commit_sent:
            sent.abandon()
        _roll_back_manual()
        raise
    if sent is None:
        _end_manual()


class _CommitInFlight:
    """A step's statement and COMMIT sent by step_transaction(commit_later=True), held in
    :mod:`core.in_flight` until collected."""

    def __init__(self, tx: StepTransaction, sent: fastdb.SentCommit) -> None:
        self.tx = tx
        self.sent = sent
        # Safety net: a query through Django's cursor outside any tenant block (which would
        # settle it) collects the commit first.
        connection.execute_wrappers.append(self.settle_first)
        in_flight.hold(self.settle)

    def settle_first(self, execute: Any, sql: Any, params: Any, many: bool, context: Any) -> Any:
        in_flight.settle()
        return execute(sql, params, many, context)

    def settle(self) -> None:
        try:
            row = self.sent.result()
        except DatabaseError as exc:
            _roll_back_manual()
            self.tx.raise_failed(exc)
        except BaseException:
            _roll_back_manual()
            raise
        finally:
            if self.settle_first in connection.execute_wrappers:
                connection.execute_wrappers.remove(self.settle_first)
        if connection.in_atomic_block:
            # A bug: a transaction was opened without settling first (tenant_context does).
            # Django cannot leave manual mode inside it; the connection is dropped instead.
            connection.close()
            raise RuntimeError("A step's commit in flight was collected inside a transaction.")
        _end_manual()  # the step's on-commit hooks run here
        self.tx.saved(row)


def settle_in_flight() -> bool:
    """Wait for this thread's step commit in flight, if any (see :func:`step_transaction`);
    raises :class:`LeaseLost` or the database error if it failed. True if there was one."""
    return in_flight.settle()


def commit_in_flight() -> bool:
    return in_flight.pending()


def _end_manual() -> None:
    """End a manual-mode step transaction whose COMMIT has been done (sent with its statement):
    Django's commit finds nothing left to do, and turning autocommit back on runs the
    transaction's on-commit hooks."""
    try:
        connection.commit()
        connection.set_autocommit(True)
    except Error:
        connection.close()  # the next use reconnects, in autocommit mode
        raise


def _roll_back_manual() -> None:
    """Roll back a manual-mode step transaction that failed, and leave manual mode. A connection
    that cannot even roll back is closed (as Django's atomic does); the next use reconnects in
    autocommit mode."""
    try:
        connection.rollback()
        connection.set_autocommit(True)
    except Error:
        connection.close()


# Raised by agentdesk_lease_lost() (migration agents 0004) when the fenced UPDATE matches nothing.
LEASE_LOST_SQLSTATE = "AD001"


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


def finish_execution(
    execution: Execution,
    *,
    status: str,
    stop_reason: str,
    output: str = "",
    error: str = "",
    error_details: dict[str, Any] | None = None,
    tx: StepTransaction | None = None,
) -> None:
    """End a run: status and summary on the row (the caller writes it), transition, agent
    stats, episode, the after-run work it is owed and ``ai.execution.*`` event, all in the
    caller's transaction."""
    now = timezone.now()
    record_transition(
        execution,
        status,
        reason=error or stop_reason,
        transition_type=TransitionType.NORMAL
        if status == ExecutionStatus.COMPLETED
        else TransitionType.ERROR,
        triggered_by=stop_reason,
        tx=tx,
    )
    execution.stop_reason = stop_reason
    execution.output = output
    execution.error = error
    execution.error_details = error_details
    execution.completed_at = now
    started = execution.started_at or execution.created_at
    execution.duration_ms = min(INT4_MAX, max(0, int((now - started).total_seconds() * 1000)))
    execution.lease_owner = ""
    execution.wait_until = None
    release_budget_reservation(execution)
    _update_agent_stats(execution)
    _record_episode(execution)
    after_run.record(execution)  # sent once this commits, and again until it is done
    _record_usage(execution)
    _delegation_ended(execution)
    metrics.run_finished(execution)  # counted once this commits
    # Seed 004's two end events (DESIGN.md: "ai.execution.completed / failed"): a run that did
    # not complete — failed, timed out, cancelled — is "failed"; status and stop_reason tell
    # which. actions_taken and tokens_used are the seed's payload names.
    succeeded = status == ExecutionStatus.COMPLETED
    with emitted_by_run(execution.id, execution.depth):  # whoever ends it (a cancel, say)
        _emit_ended(execution, status=status, stop_reason=stop_reason, succeeded=succeeded)


def _emit_ended(execution: Execution, *, status: str, stop_reason: str, succeeded: bool) -> None:
    output, error = execution.output, execution.error
    event_emit(
        agency_id=execution.agency_id,
        site_id=execution.site_id,
        event_type="ai.execution.completed" if succeeded else "ai.execution.failed",
        payload={
            "execution_id": str(execution.id),
            "agent_id": str(execution.agent_id),
            "actions_taken": execution.tool_call_count,
            "tokens_used": execution.tokens_total,
            "status": status,
            "stop_reason": stop_reason,
            "output": output[:2000],
            "error": error[:2000],
            "tokens_total": execution.tokens_total,
            "cost_usd": str(execution.cost_usd),
            "duration_ms": execution.duration_ms,
        },
        source_module="agents",
        source_entity_type="execution",
        source_entity_id=str(execution.id),
        actor_type=ActorType.AGENT,
        actor_id=str(execution.agent_id),
    )


# Seed 004's trigger_update_agent_stats fires only
#     WHEN (OLD.status = 'running' AND NEW.status IN ('completed', 'failed'))
# and its update_agent_stats() counts
#     failed_runs = failed_runs + CASE WHEN NEW.status = 'failed' THEN 1 ELSE 0 END,
#     last_error = CASE WHEN NEW.status = 'failed' THEN NEW.error ELSE last_error END,
# So a run counts in the stats when it ends completed or failed; a cancelled run (a human
# stopped it, or denied its action) and a timed-out one leave them as they were: no run, no
# failure, and last_error keeps the last real failure. (The seed's OLD.status = 'running' only
# makes the trigger fire once per run; our finish runs once per run, whatever state it ends from.)
_COUNTED_STATUSES = frozenset({ExecutionStatus.COMPLETED, ExecutionStatus.FAILED})


def _update_agent_stats(execution: Execution) -> None:
    """Seed 004's update_agent_stats (rule above), as one UPDATE."""
    if execution.status not in _COUNTED_STATUSES:
        return
    failed = execution.status == ExecutionStatus.FAILED
    with connection.cursor() as cursor:
        cursor.execute(
            _AGENT_STATS_SQL,
            {
                "agent": execution.agent_id,
                "succeeded": int(not failed),
                "failed": int(failed),
                "tokens": execution.tokens_total,
                "cost": execution.cost_usd,
                "actions": execution.tool_call_count,
                "duration": execution.duration_ms or 0,
                "finished": execution.completed_at,
                "error": execution.error[:2000] if failed else None,
            },
        )


# Written out once instead of compiled from F() expressions at the end of every run.
# The average is the exact mean, rounded: the sum of response times (bigint) over the runs,
# divided in numeric. (Updated in place in int4 it overflowed at avg x runs > 2^31, failing every
# later finish, and truncated at each run, drifting far below the mean.) In SET, columns on the
# right are the row's values before the update.
_AGENT_STATS_SQL = """
UPDATE agents_agent SET
    total_runs = total_runs + 1,
    successful_runs = successful_runs + %(succeeded)s,
    failed_runs = failed_runs + %(failed)s,
    total_tokens_used = total_tokens_used + %(tokens)s,
    total_cost_usd = total_cost_usd + %(cost)s,
    total_actions_taken = total_actions_taken + %(actions)s,
    total_response_time_ms = total_response_time_ms + %(duration)s,
    avg_response_time_ms = round(
        (total_response_time_ms + %(duration)s)::numeric / (total_runs + 1)
    ),
    last_run_at = %(finished)s,
    last_error = coalesce(%(error)s, last_error),
    updated_at = now()
WHERE id = %(agent)s
"""


def _record_usage(execution: Execution) -> None:
    """The run's model usage into today's usage row, once, when the run ends: the execution row
    carries the totals step by step, so a crash loses nothing and nothing is counted twice."""
    from usage.services import usage_record_llm_call  # noqa: PLC0415

    snapshot = execution.config_snapshot or {}
    usage_record_llm_call(
        agency_id=execution.agency_id,
        site_id=execution.site_id,
        agent_id=execution.agent_id,
        provider=str(snapshot.get("llm_provider", "")),
        model=str(snapshot.get("llm_model", "")),
        usage=Usage(
            input_tokens=execution.tokens_input,
            output_tokens=execution.tokens_output,
            cache_read_tokens=execution.tokens_cache_read,
            cache_write_tokens=execution.tokens_cache_write,
        ),
        cost=execution.cost_usd,
        runs=1,
        llm_calls=execution.llm_call_count,
        tool_calls=execution.tool_call_count,
    )


def _delegation_ended(execution: Execution) -> None:
    """Teams (issue 19): a delegated run's end resumes the run that waits for it, with its
    result; a run that ends otherwise than completed cancels the runs it delegated to."""
    delegated = execution.trigger_type == TriggerType.AGENT
    if not delegated and execution.status == ExecutionStatus.COMPLETED:
        return  # the common case: no query
    from teams import services  # noqa: PLC0415 - teams depends on the runtime

    services.run_ended(execution)


def _record_episode(execution: Execution) -> None:
    """The run's episode (memory.episodes), completed by ``memory.after_run`` (after-run work)."""
    from memory.episodes import episode_record  # noqa: PLC0415 - memory depends on agents

    episode_record(execution)
