"""One total time limit for a fetch: name resolution, connect, TLS, request, headers and body.

httpx's timeouts bound each network operation, not their sum: a server that sends one header
line (or one body byte) every 100 ms never trips a 15 s read timeout. So every operation of the
connection is given ``min(its own timeout, time left until the deadline)`` by a network backend
that wraps httpcore's own, and refused once nothing is left. Each operation is a single blocking
call that CPython bounds as a whole (``connect``, one ``recv``, one ``send``, the TLS handshake),
so the fetch ends within one operation's slack of its deadline, and no watchdog thread has to
race the connection for its socket (after ``start_tls`` the plain socket is detached, so a
watchdog holding it could not shut the TLS handshake).

``getaddrinfo`` cannot be given a timeout or be cancelled: a resolver runs in a daemon thread
and the fetch stops waiting for it at the deadline (the thread ends when the system resolver
gives up, after the attempts and timeouts of ``resolv.conf``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, wait
from ssl import SSLContext
from typing import Any

import httpcore
import httpx

from tools.net.addresses import Resolver
from tools.net.errors import FetchError


def _within(
    deadline: float, timeout: float | None, expired: type[httpcore.TimeoutException]
) -> float:
    """The timeout for the next operation: never past the deadline, never 0 (0 would make the
    socket non-blocking, not bounded)."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise expired("The total time limit of the fetch was reached.")
    return remaining if timeout is None else min(timeout, remaining)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream, deadline: float) -> None:
        self._inner = inner
        self._deadline = deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _within(self._deadline, timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        # httpcore gives every partial send the same timeout; a GET's few hundred bytes go out in
        # one send, so this too ends by the deadline.
        self._inner.write(buffer, _within(self._deadline, timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        timeout = _within(self._deadline, timeout, httpcore.ConnectTimeout)
        tls = self._inner.start_tls(ssl_context, server_hostname, timeout)
        return _DeadlineStream(tls, self._deadline)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.SyncBackend):
    def __init__(self, deadline: float) -> None:
        self._deadline = deadline

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        timeout = _within(self._deadline, timeout, httpcore.ConnectTimeout)
        stream = super().connect_tcp(host, port, timeout, local_address, socket_options)
        return _DeadlineStream(stream, self._deadline)


def transport_with_deadline(deadline: float, *, verify: SSLContext) -> httpx.HTTPTransport:
    """An httpx transport (no proxy, whatever the environment says) whose connections all end
    by ``deadline`` (a ``time.monotonic()`` value)."""
    transport = httpx.HTTPTransport(verify=verify, trust_env=False)
    pool = getattr(transport, "_pool", None)
    # httpx offers no public way to give its connection pool a network backend; the pool reads
    # this attribute for every connection it opens. Fail loudly if an upgrade moved it, rather
    # than fetch without a total time limit.
    if not isinstance(pool, httpcore.ConnectionPool) or not hasattr(pool, "_network_backend"):
        raise RuntimeError("Cannot bound the fetch's time: httpx changed its transport")
    pool._network_backend = _DeadlineBackend(deadline)
    return transport


def _settle(future: Future[Sequence[str]], resolver: Resolver, host: str, port: int) -> None:
    try:
        future.set_result(resolver(host, port))
    except BaseException as exc:  # handed to the waiting fetch, which re-raises it
        future.set_exception(exc)


def resolver_with_deadline(resolver: Resolver, deadline: float) -> Resolver:
    """``resolver``, raising :class:`FetchError` ``timeout`` if it has not answered by
    ``deadline``; its other errors and its answers pass through unchanged."""

    def resolve(host: str, port: int) -> Sequence[str]:
        if deadline <= time.monotonic():  # no thread for a lookup that could not be waited for
            raise FetchError("timeout", f"No time left to resolve {host}.", url=host)
        future: Future[Sequence[str]] = Future()
        worker = threading.Thread(
            target=_settle, args=(future, resolver, host, port), name="resolve", daemon=True
        )
        worker.start()
        done, _pending = wait([future], timeout=max(0.0, deadline - time.monotonic()))
        if not done:
            raise FetchError("timeout", f"Resolving {host} took too long.", url=host)
        return future.result()

    return resolve
