"""The REST API: ``/api/v1/...``, its OpenAPI schema and the docs page (assets served locally)."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, include, path, re_path
from drf_spectacular.views import SpectacularSwaggerView

from core.api.schema_view import SchemaView
from core.api.views_misc import api_not_found

v1: list[URLPattern | URLResolver] = [
    path("", include("agents.api.urls")),
    path("", include("memory.api.urls")),
    path("", include("approvals.api.urls")),
    path("", include("tools.api.urls")),
    path("", include("usage.api.urls")),
    path("", include("core.api.urls")),
    path("", include("webhooks.urls")),  # deliveries, and agents/{id}/webhooks/
    path("", include("members.api.urls")),
    # Anything else under /api/v1/ is a JSON 404 in the API's error shape, not an HTML page.
    re_path(r"^.*$", api_not_found),
]

urlpatterns = [
    path("v1/", include(v1)),
    path("schema/", SchemaView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
]
