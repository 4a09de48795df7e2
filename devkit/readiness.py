"""When ``manage.py up`` may say the platform is running: once its ``/healthz`` answers 200
(PostgreSQL, Redis and a Celery worker reachable), not merely once the web server's port opens
(the worker may still be starting then, and the page would answer 503)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

POLL_INTERVAL_S = 0.5
PROBE_TIMEOUT_S = 5  # /healthz answers within 2 s by design


def probe(url: str) -> tuple[int, dict[str, Any]]:
    """``url``'s status and JSON body; (0, {}) when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=PROBE_TIMEOUT_S) as response:  # noqa: S310 - the URL is up's own
            return response.status, _json(response.read())
    except urllib.error.HTTPError as exc:  # a 503 naming what is down
        return exc.code, _json(exc.read())
    except OSError:
        return 0, {}


def _json(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except ValueError:
        return {}
    return dict(body) if isinstance(body, dict) else {}


def wait_until_healthy(
    url: str,
    *,
    stopped: Callable[[], bool],
    on_slow: Callable[[int, dict[str, Any]], None] | None = None,
    slow_after_s: float = 30,
) -> bool:
    """Poll ``url`` (a ``/healthz``) until it answers 200: True; False once ``stopped()`` says
    to give up. ``on_slow`` is told the last answer once, after ``slow_after_s`` without a 200."""
    started = time.monotonic()
    told = False
    while not stopped():
        status, body = probe(url)
        if status == 200:
            return True
        if on_slow is not None and not told and time.monotonic() - started > slow_after_s:
            on_slow(status, body)
            told = True
        time.sleep(POLL_INTERVAL_S)
    return False
