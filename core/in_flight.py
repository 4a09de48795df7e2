"""A COMMIT still in flight on this thread's database connection, and who waits for it.

The runtime sends a tool result's statement and COMMIT and goes on building the next model
request while PostgreSQL executes and flushes them (``agents.runtime.store.step_transaction``,
``commit_later``); until the outcome is collected the connection's pipeline is open and nothing
else may use it. Whoever needs the connection first calls :func:`settle`: every tenant block
(:func:`core.tenancy.tenant_context`, which every transaction of the platform opens), the
one-round-trip writes, and the runtime just before the model request goes out. Django's
connections are per thread, and so is this.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

_current = threading.local()


def hold(collect: Callable[[], None]) -> None:
    """Record this thread's commit in flight; ``collect`` waits for it (and raises its error)."""
    assert getattr(_current, "collect", None) is None, "one commit in flight at a time"
    _current.collect = collect


def pending() -> bool:
    return getattr(_current, "collect", None) is not None


def settle() -> bool:
    """Wait for this thread's commit in flight, if any; True if there was one. Raises what
    the commit raised (it is collected either way)."""
    collect: Callable[[], None] | None = getattr(_current, "collect", None)
    if collect is None:
        return False
    _current.collect = None
    collect()
    return True
