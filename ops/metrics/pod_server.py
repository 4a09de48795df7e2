"""``/metrics`` served by a worker or beat process itself, on ``AGENTDESK_METRICS_PORT``.

Where the platform's processes share one samples directory (``manage.py up``, docker-compose's
volume), any web process serves them all. Where they do not (Kubernetes: each pod has its own
directory, an ``emptyDir``), nothing would serve a worker pod's samples: a worker or beat started
with the port set serves its own pod's directory there, the samples of every process writing to
it (counters, histograms, live gauges), to the same clients as the web's ``/metrics``
(:mod:`ops.metrics.access`). The gauges read at scrape time (queue depth and age, approvals and
questions waiting, the web pool) stay the web's alone: they are not reported once per pod.

A thread of the process, started when the worker is ready or beat starts
(:mod:`ops.metrics.celery_signals`): it answers while the process runs, and stops with it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from django.conf import settings
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.multiprocess import MultiProcessCollector

from ops.metrics import access, multiprocess

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_server: WSGIServer | None = None

StartResponse = Callable[[str, list[tuple[str, str]]], Any]


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True  # a scrape in flight never holds the process's exit


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Every scrape would be an access-log line on stderr."""


def _answer(
    start_response: StartResponse, status: str, text: str, headers: list[tuple[str, str]]
) -> Iterable[bytes]:
    start_response(status, [("Content-Type", "text/plain; charset=utf-8"), *headers])
    return [text.encode()]


def application(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    """GET or HEAD ``/metrics``: this pod's samples, for a client :mod:`access` allows."""
    if environ.get("PATH_INFO") != "/metrics":
        return _answer(start_response, "404 Not Found", "Only /metrics is served here.\n", [])
    if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
        return _answer(start_response, "405 Method Not Allowed", "GET only.\n", [("Allow", "GET")])
    decision = access.decide_for(
        authorization=environ.get("HTTP_AUTHORIZATION", ""),
        address=environ.get("REMOTE_ADDR", ""),
    )
    if decision.verdict is not access.Verdict.ALLOWED:
        if decision.verdict is access.Verdict.BAD_TOKEN or decision.token_configured:
            return _answer(
                start_response,
                "401 Unauthorized",
                "A valid bearer token is required.\n",
                [("WWW-Authenticate", 'Bearer realm="metrics"')],
            )
        return _answer(
            start_response,
            "403 Forbidden",
            "Not an allowed address (AGENTDESK_METRICS_ALLOWED_IPS).\n",
            [],
        )
    path = multiprocess.directory()
    multiprocess.sweep_dead_processes(path)
    registry = CollectorRegistry(auto_describe=False)
    MultiProcessCollector(registry, path=str(path))
    encoder, content_type = choose_encoder(environ.get("HTTP_ACCEPT", ""))
    start_response("200 OK", [("Content-Type", content_type), ("Cache-Control", "no-store")])
    return [encoder(registry)]


def start(port: int | None = None, host: str = "0.0.0.0") -> int | None:  # noqa: S104 - a pod's port, guarded by access
    """Serve ``/metrics`` on ``port`` (``AGENTDESK_METRICS_PORT`` by default; 0 or metrics off:
    nothing) from a daemon thread; once per process. Returns the port bound, or ``None``."""
    global _server  # noqa: PLW0603 - one server per process
    port = settings.AGENTDESK_METRICS_PORT if port is None else port
    if not port or not settings.AGENTDESK_METRICS:
        return None
    with _lock:
        if _server is None:
            try:
                _server = make_server(
                    host, port, application, server_class=_Server, handler_class=_QuietHandler
                )
            except OSError as exc:
                # Not fatal: the process's work matters more than its metrics.
                logger.error("metrics: cannot serve /metrics on port %s: %s", port, exc)
                return None
            threading.Thread(
                target=_server.serve_forever, name="metrics-server", daemon=True
            ).start()
            logger.info("metrics: serving this pod's /metrics on port %s", _server.server_port)
        return int(_server.server_port)


def stop() -> None:
    """Tests: close the server of this process."""
    global _server  # noqa: PLW0603
    with _lock:
        if _server is not None:
            _server.shutdown()
            _server.server_close()
            _server = None
