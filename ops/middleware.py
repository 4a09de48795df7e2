"""``/metrics`` answered ahead of the session, authentication and tenant middleware."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from ops.views import METRICS_PATH, metrics


class MetricsMiddleware:
    """A scrape needs no session, user or tenant transaction: the counters are files, and the
    waiting gauges open their own short query (left out when the database does not answer)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path == METRICS_PATH:
            return metrics(request)
        return self.get_response(request)
