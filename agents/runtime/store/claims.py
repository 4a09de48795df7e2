"""Claim and lease: a delivery takes a run for its worker (a pending run, or a running one whose
lease ran out), notes its budget reservation on the fenced row, and counts the time the run has
been running."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from django.db import connection
from django.utils import timezone

from agents.lifecycle import record_transition, release_budget_reservation
from agents.models import Execution, ExecutionStatus, ExecutionStep, StateTransition, TransitionType
from agents.runtime.store.steps import LeaseLost, StepTransaction, lease_deadline

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
