"""``GET /metrics``: the platform's Prometheus metrics (README "Operations: metrics and traces")."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from ops.metrics import access

METRICS_PATH = "/metrics"


@never_cache
@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    """Every process's samples summed, and the gauges read now (approvals and questions
    waiting, queue depth). For the bearer token or an allowed address only (ops.metrics.access).
    Served by ops.middleware.MetricsMiddleware before the session and tenant middleware: the
    counters need no database, and a database outage only leaves the waiting gauges out."""
    if not settings.AGENTDESK_METRICS:
        return HttpResponse("Metrics are off (AGENTDESK_METRICS=false).\n", status=404)
    decision = access.decide(request)
    if decision.verdict is not access.Verdict.ALLOWED:
        if decision.verdict is access.Verdict.BAD_TOKEN or decision.token_configured:
            response = HttpResponse("A valid bearer token is required.\n", status=401)
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
            return response
        return HttpResponse("Not an allowed address (AGENTDESK_METRICS_ALLOWED_IPS).\n", status=403)
    from ops.metrics import exposition  # noqa: PLC0415 - the client library, on a scrape only

    body, content_type = exposition.render(request.headers.get("Accept", ""))
    return HttpResponse(body, content_type=content_type)
