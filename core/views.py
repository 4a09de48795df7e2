"""Platform endpoints that are not part of an app's API."""

from __future__ import annotations

from django.db import connection
from django.http import HttpRequest, HttpResponsePermanentRedirect, JsonResponse
from django.templatetags.static import static
from django.utils.log import log_response
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from core.api.exceptions import error_body
from core.health import check_celery, check_database, check_redis, run_checks

HEALTH_PATH = "/healthz"
LIVENESS_PATH = "/livez"
FAVICON = "core/favicon.svg"  # a static file; admin pages link it too (UNFOLD SITE_FAVICONS)


# What /healthz may probe; ``?checks=`` picks some (a web pod's readiness needs no worker).
HEALTH_CHECKS = ("database", "redis", "celery")


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Reachability of PostgreSQL, Redis and a Celery worker, probed at once and answered
    within 2 s: 200 when all are up, else 503 naming what is down (``down``). ``?checks=``
    (comma-separated names of HEALTH_CHECKS) probes only those: ``?checks=database`` is a web
    pod's readiness, which a stopped worker or Redis must not take out of service; an unknown
    name is a 400. Served by core.middleware.HealthCheckMiddleware before any middleware that
    needs the database."""
    wanted: tuple[str, ...] = HEALTH_CHECKS
    if "checks" in request.GET:
        wanted = tuple(name for name in request.GET["checks"].split(",") if name)
        unknown = sorted(set(wanted) - set(HEALTH_CHECKS)) or ([] if wanted else ["(none)"])
        if unknown:
            message = (
                f"checks: {', '.join(unknown)} is not one of {', '.join(HEALTH_CHECKS)} "
                "(comma-separated)."
            )
            return JsonResponse(error_body("unknown_check", message), status=400)
    probes = {
        "database": lambda: check_database(connection),
        "redis": check_redis,
        "celery": lambda: check_celery(),  # noqa: PLW0108 - looked up at each call
    }
    checks = run_checks({name: probes[name] for name in HEALTH_CHECKS if name in wanted})
    down = [name for name, result in checks.items() if not result["ok"]]
    body = {"status": "ok" if not down else "down", "down": down, "checks": checks}
    response = JsonResponse(body, status=503 if down else 200)
    if down:
        # An answer, not a failure of this view: a 503 here is what a probe asks about (and
        # every start-up says, until the worker and the database are up, at `up`'s poll each
        # half second). Logged here at INFO, naming what is down, which marks the response as
        # logged: Django's request logger would log it as an ERROR with no detail. Every other
        # 5xx still goes to that logger as an error.
        log_response(
            "Health check answered %s: %s down",
            response.status_code,
            ", ".join(down),
            response=response,
            request=request,
            level="info",
        )
    return response


@never_cache
@require_GET
def livez(request: HttpRequest) -> JsonResponse:
    """Liveness: 200 whenever this process serves requests, and nothing else checked. A
    liveness probe that looked at the database (as ``/healthz`` does) would have Kubernetes
    restart every web pod during a database outage, which the pods ride out on their own (503
    ``database_unavailable`` meanwhile); readiness is ``/healthz``'s job. Served by
    core.middleware.HealthCheckMiddleware ahead of the session, tenant and host checks."""
    return JsonResponse({"status": "ok"})


@require_GET
def favicon(request: HttpRequest) -> HttpResponsePermanentRedirect:
    """``/favicon.ico``, which browsers ask for on their own: the icon's static file."""
    return HttpResponsePermanentRedirect(static(FAVICON))
