"""The caller's hook that runs just before a model call's first request goes out.

The runtime sends a tool result's COMMIT and lets PostgreSQL make it durable while the SDK builds
the next request; the hook waits for that commit (and checks the run was not cancelled or taken
over meanwhile) at the last moment, when the request is built and nothing has gone out yet. It
runs once per call, on the caller's thread, from the HTTP client's request event hook (every
client :func:`agents.llm.endpoints.http_client` builds has it), so before a connection is opened
or reused. What it raises ends the call as it is: not wrapped by the SDK into a connection error,
not retried (:meth:`agents.llm.base.Provider.complete` re-raises it).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

_current = threading.local()


@dataclass
class Gate:
    hook: Callable[[], None] | None
    # What the hook raised: the caller's, to re-raise instead of the SDK's wrapping of it.
    failure: BaseException | None = None
    # Seconds the hook took: the caller's time, not the model's (left out of latency_ms).
    seconds: float = 0.0


def hook_seconds() -> float:
    """The seconds the current call's hook took (0 outside a call, or before it ran)."""
    gate: Gate | None = getattr(_current, "gate", None)
    return gate.seconds if gate is not None else 0.0


@contextmanager
def before_send(hook: Callable[[], None] | None) -> Iterator[Gate]:
    """Run ``hook`` before the first request of this thread's model call inside the block."""
    previous = getattr(_current, "gate", None)
    gate = _current.gate = Gate(hook)
    try:
        yield gate
    finally:
        _current.gate = previous


def request_hook(request: Any) -> None:
    """The HTTP clients' request event hook: runs the current call's hook, once."""
    gate: Gate | None = getattr(_current, "gate", None)
    if gate is None or gate.hook is None:
        return
    hook, gate.hook = gate.hook, None  # retries of the call do not run it again
    started = time.monotonic()
    try:
        hook()
    except BaseException as exc:
        gate.failure = exc
        raise
    finally:
        gate.seconds = time.monotonic() - started
