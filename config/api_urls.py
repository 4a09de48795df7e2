"""The REST API: ``/api/v1/...``, its OpenAPI schema and the docs page (assets served locally)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, URLResolver, include, path, re_path
from django.utils.module_loading import import_string
from django.views.decorators.csrf import csrf_exempt

from core.api.views_misc import api_not_found


@functools.cache
def _view(dotted: str, **initkwargs: Any) -> Callable[..., HttpResponse]:
    return import_string(dotted).as_view(**initkwargs)


def _lazy(dotted: str, **initkwargs: Any) -> Callable[..., HttpResponse]:
    """The view ``dotted`` imported on its first request: drf-spectacular's views pull in
    django.test and jinja2 (a quarter of a second), which no command and few requests need."""

    @csrf_exempt
    def view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return _view(dotted, **initkwargs)(request, *args, **kwargs)

    return view


v1: list[URLPattern | URLResolver] = [
    path("", include("agents.api.urls")),
    path("", include("memory.api.urls")),
    path("", include("approvals.api.urls")),
    path("", include("tools.api.urls")),
    path("", include("usage.api.urls")),
    path("", include("core.api.urls")),
    path("", include("webhooks.urls")),  # deliveries, and agents/{id}/webhooks/
    path("", include("members.api.urls")),
    path("", include("evals.api.urls")),  # datasets, test cases, experiments
    path("", include("datasets.api.urls")),  # analysis/datasets, analysis/results
    path("", include("audit.api.urls")),  # audit/entries/: the audit log's export
    # Anything else under /api/v1/ is a JSON 404 in the API's error shape, not an HTML page.
    re_path(r"^.*$", api_not_found),
]

urlpatterns = [
    path("v1/", include(v1)),
    path("schema/", _lazy("core.api.schema_view.SchemaView"), name="api-schema"),
    path(
        "docs/",
        _lazy("drf_spectacular.views.SpectacularSwaggerView", url_name="api-schema"),
        name="api-docs",
    ),
]
