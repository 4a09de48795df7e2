"""The live broadcast of an execution's events, sent once the transaction that writes them
commits (docs/live-protocol.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from agents.lifecycle import protocol
from agents.models import Execution
from core import realtime


def broadcast(
    execution: Execution,
    kind: Literal["step", "status"],
    data: protocol.StepData | protocol.StatusData,
    deferred: list[Callable[[], None]] | None = None,
) -> None:
    """Every event to the execution's page; status changes also to the agency dashboard. Sent
    when the transaction commits: by Django's on-commit hooks, or by whoever runs ``deferred``.
    The payload is the protocol's (agents/lifecycle/protocol.py), the one a catch-up reads
    back."""
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
