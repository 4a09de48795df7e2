"""Whether this worker process is draining: it got SIGTERM (agents/worker_drain.py sets the flag
from Celery's ``worker_shutting_down``). A run reads it at each step boundary
(``RunBase._should_stop``): once its step in flight has committed, it hands the run back
(pending, lease released) instead of starting the next model or tool call, and its delivery
returns :data:`HANDED_BACK` for the task to send the run to its queue again."""

from __future__ import annotations

import threading

# A delivery's outcome when its run was handed back for another worker to continue.
HANDED_BACK = "handed_back"

_draining = threading.Event()


def begin() -> None:
    """From now on, runs of this process hand themselves back at their next step boundary."""
    _draining.set()


def draining() -> bool:
    return _draining.is_set()


def reset() -> None:
    """Not draining (a test's in-process run after a drain test)."""
    _draining.clear()
