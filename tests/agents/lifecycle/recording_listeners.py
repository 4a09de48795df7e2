"""Run-ended listeners for the lifecycle's tests, named in AGENTDESK_RUN_ENDED_LISTENERS by the
tests alone. Each notes what it saw, and writes a row (an event, ``MARK``) in the transaction it
is called in: the row commits or rolls back with that transaction, and its ``xmin`` names it."""

from __future__ import annotations

from typing import Any

from django.db import connection

from agents.lifecycle import RunEnded
from core.events import event_emit

CALLS: list[dict[str, Any]] = []
MARK = "test.run_ended.listener_called"


class ListenerFailed(Exception):
    pass


def _note(name: str, ended: RunEnded) -> None:
    execution = ended.execution
    event_emit(
        agency_id=execution.agency_id,
        event_type=MARK,
        payload={"listener": name},
        source_entity_id=str(execution.id),
        dispatch=False,
    )
    CALLS.append(
        {
            "listener": name,
            "execution": ended.execution.id,
            "status": ended.execution.status,
            "from_status": ended.from_status,
            "by_worker": ended.by_worker,
            "completed_at": ended.execution.completed_at,
            "in_transaction": connection.in_atomic_block,
        }
    )


def first(ended: RunEnded) -> None:
    _note("first", ended)


def second(ended: RunEnded) -> None:
    _note("second", ended)


def raising(ended: RunEnded) -> None:
    _note("raising", ended)
    raise ListenerFailed(f"run {ended.execution.id}: this listener fails")


NOT_CALLABLE = "a listener must be callable"
