"""Platform endpoints that are not part of an app's API."""

from __future__ import annotations

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from core.health import check_celery, check_database, check_redis


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Reachability of PostgreSQL, Redis and a Celery worker: 200 when all are up, else 503."""
    checks = {
        "database": check_database(connection),
        "redis": check_redis(),
        "celery": check_celery(),
    }
    down = [name for name, result in checks.items() if not result["ok"]]
    body = {"status": "ok" if not down else "down", "down": down, "checks": checks}
    return JsonResponse(body, status=503 if down else 200)
