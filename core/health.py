"""Health probes: each returns ``{"ok": bool, ...}`` and never raises."""

from __future__ import annotations

import time
from typing import Any, TypedDict

import redis
from celery import Celery
from django.conf import settings
from django.db.backends.base.base import BaseDatabaseWrapper

from config.celery_app import app as celery_app


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
    def probe() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()

    return _timed(probe)


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
