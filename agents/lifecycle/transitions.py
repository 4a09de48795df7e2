"""State changes of an execution (seed 003's state transitions): checked against the state
machine, written once, broadcast after commit."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any, Protocol

from agents.lifecycle import broadcasting, protocol
from agents.lifecycle.states import can_transition
from agents.models import Execution, StateTransition, TransitionType
from core import fastdb
from core.exceptions import ApplicationError

if TYPE_CHECKING:
    from django.db.models import Model


class RowWriter(Protocol):
    """A step's transaction as the lifecycle writes with it (the runtime's StepTransaction):
    rows added to its one statement (docs/decisions/0003-runtime-write-path.md)."""

    def defer_insert(self, obj: Model) -> None: ...

    def defer_row(self, parts: fastdb.Parts) -> None: ...


# Durations are int4 columns: one longer than ~24.8 days (an approval nobody decides, a run
# that waited that long) is recorded as the maximum rather than failing the write that ends it.
INT4_MAX = 2**31 - 1
_CLOSE_STATE_SQL = (
    "UPDATE agents_statetransition SET exited_at = %s,"
    " duration_ms = least(greatest(0, round(extract(epoch FROM %s - entered_at) * 1000)), %s)"
    " WHERE execution_id = %s AND exited_at IS NULL"
)


def record_transition(
    execution: Execution,
    to_status: str,
    *,
    reason: str,
    transition_type: str = TransitionType.NORMAL,
    triggered_by: str = "",
    metadata: dict[str, Any] | None = None,
    created: bool = False,
    tx: RowWriter | None = None,
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
    broadcasting.broadcast(
        execution,
        "status",
        protocol.status_data(from_status=from_status, to_status=to_status, reason=reason),
    )
    return transition


def _close_state(execution: Execution, at: datetime.datetime) -> fastdb.Parts:
    """The UPDATE that ends the execution's current state at ``at`` (seed 003's exited_at and
    duration_ms): the open transition row, the one no later change has closed."""
    return _CLOSE_STATE_SQL, [at, at, INT4_MAX, execution.id]
