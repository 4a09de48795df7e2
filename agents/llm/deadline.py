"""The caller's time limit for a model call, enforced on the connection of an agency's endpoint.

The HTTP client's timeouts bound each network operation, not their sum: an endpoint that sends a
byte now and then never trips a read timeout, and a tenant's own endpoint could hold a worker
thread — shared with every other agency's runs — for as long as it likes. So while a call with a
time limit runs (:func:`call_deadline`, set by the provider around each attempt), every operation
on such a connection gets ``min(its own timeout, the time left)`` and is refused once nothing is
left. Each operation (connect, one recv, one send, the TLS handshake) is one blocking call
CPython bounds as a whole, so the call ends within one operation's slack of its limit.

The limit is per thread (a call runs on its caller's thread) and read at each operation, because
connections are pooled and a later call — on any thread — reuses them. ``web_scrape`` bounds its
fetches the same way per connection (``tools.net.deadline``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from ssl import SSLContext
from typing import Any

import httpcore2

_current = threading.local()


@contextmanager
def call_deadline(deadline: float | None) -> Iterator[None]:
    """Operations of this thread's model call end by ``deadline`` (``time.monotonic()``)."""
    previous = getattr(_current, "deadline", None)
    _current.deadline = deadline
    try:
        yield
    finally:
        _current.deadline = previous


def _within(timeout: float | None, expired: type[httpcore2.TimeoutException]) -> float | None:
    deadline: float | None = getattr(_current, "deadline", None)
    if deadline is None:
        return timeout
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise expired("The model call's time limit was reached.")
    # Never 0: that would make the socket non-blocking, not bounded.
    return remaining if timeout is None else min(timeout, remaining)


class BoundedStream(httpcore2.NetworkStream):
    """A connection whose every operation ends by the current call's deadline."""

    def __init__(self, inner: httpcore2.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _within(timeout, httpcore2.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _within(timeout, httpcore2.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore2.NetworkStream:
        timeout = _within(timeout, httpcore2.ConnectTimeout)
        return BoundedStream(self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


def connect_timeout(timeout: float | None) -> float | None:
    """The timeout for opening a connection within the current call's limit."""
    return _within(timeout, httpcore2.ConnectTimeout)
