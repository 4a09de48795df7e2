"""`manage.py up` says the platform is running only once /healthz answers 200
(devkit/readiness.py), against a real HTTP server on loopback that is unhealthy at first."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from devkit.readiness import wait_until_healthy


class _Health:
    """A /healthz that answers 503 (the worker down) ``unhealthy`` times, then 200."""

    def __init__(self, unhealthy: int) -> None:
        self.unhealthy = unhealthy
        self.answers: list[int] = []


@pytest.fixture
def health() -> Iterator[tuple[str, _Health]]:
    state = _Health(unhealthy=3)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status = 503 if len(state.answers) < state.unhealthy else 200
            state.answers.append(status)
            body = json.dumps({"status": "ok" if status == 200 else "down", "down": ["celery"]})
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/healthz", state
    server.shutdown()
    server.server_close()


def test_it_waits_for_a_200_through_the_503s(health: tuple[str, _Health]) -> None:
    url, state = health
    slow: list[tuple[int, dict[str, Any]]] = []

    healthy = wait_until_healthy(
        url, stopped=lambda: False, on_slow=lambda *told: slow.append(told), slow_after_s=0
    )

    assert healthy
    assert state.answers == [503, 503, 503, 200]
    assert slow == [(503, {"status": "down", "down": ["celery"]})]  # told once, with what


def test_it_gives_up_when_told_to_stop(health: tuple[str, _Health]) -> None:
    url, state = health
    state.unhealthy = 10**6

    assert not wait_until_healthy(url, stopped=lambda: len(state.answers) >= 2)
    assert state.answers == [503, 503]
