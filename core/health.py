"""Health probes: each returns ``{"ok": bool, ...}`` and never raises."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, TypedDict

import redis
from celery import Celery
from django.conf import settings
from django.db.backends.base.base import BaseDatabaseWrapper

from config.celery_app import app as celery_app
from core import database

# /healthz answers within this (a load balancer's probe should not hang on a dead dependency).
DEADLINE_SECONDS = 1.8


class CheckResult(TypedDict, total=False):
    ok: bool
    ms: float
    error: str
    workers: list[str]


def _timed(probe: Any) -> CheckResult:
    started = time.perf_counter()
    try:
        extra = probe() or {}
    except Exception as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    result: CheckResult = {"ok": True, "ms": round((time.perf_counter() - started) * 1000, 2)}
    result.update(extra)  # type: ignore[typeddict-item]
    return result


def check_database(connection: BaseDatabaseWrapper) -> CheckResult:
    """A new connection, not one of the pool's: after a restart the pool may still hold dead
    ones (and wait its whole timeout for a live one), and the probe must tell the truth fast."""
    return _timed(lambda: database.answers_fresh_connection(connection))


def run_checks(
    probes: Mapping[str, Callable[[], CheckResult]], *, deadline: float = DEADLINE_SECONDS
) -> dict[str, CheckResult]:
    """Every probe at once, each answered within ``deadline`` seconds: one that has not answered
    by then is reported down (its thread finishes in the background, bounded by its own
    timeouts)."""
    pool = ThreadPoolExecutor(max_workers=len(probes), thread_name_prefix="healthz")
    try:
        futures = {name: pool.submit(probe) for name, probe in probes.items()}
        wait(futures.values(), timeout=deadline)
        results: dict[str, CheckResult] = {}
        for name, future in futures.items():
            if future.done():
                results[name] = future.result()
            else:
                results[name] = {"ok": False, "error": f"no answer within {deadline} s"}
        return results
    finally:
        pool.shutdown(wait=False)


def check_redis() -> CheckResult:
    def probe() -> None:
        client = redis.Redis.from_url(
            settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1
        )
        try:
            client.ping()
        finally:
            client.close()

    return _timed(probe)


def check_celery(app: Celery = celery_app) -> CheckResult:
    def probe() -> dict[str, Any]:
        # Returns as soon as one worker answers; waits at most the timeout when none does.
        replies = app.control.ping(timeout=1.0, limit=1)
        if not replies:
            raise RuntimeError("no Celery worker answered a ping within 1 s")
        return {"workers": sorted(name for reply in replies for name in reply)}

    return _timed(probe)
