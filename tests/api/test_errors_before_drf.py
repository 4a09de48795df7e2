"""Errors under /api/ that DRF never sees (a failing middleware, a database outage, a view
outside DRF, Django's own 404 and 400) are the API's JSON error shape, DEBUG or not."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.db import OperationalError
from django.http import HttpRequest, HttpResponse
from django.test import override_settings
from django.urls import include, path
from rest_framework.test import APIClient

from core.models import Role
from tests.api.conftest import token_client

AGENTS = "/api/v1/agents/"


def _boom_view(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("secret detail of a plain view")


def _outage_view(request: HttpRequest) -> HttpResponse:
    raise OperationalError("connection lost") from psycopg.OperationalError("server closed")


# This module is also a URL conf: the project's URLs plus two plain (non-DRF) views under /api/.
urlpatterns = [
    path("api/boom/", _boom_view),
    path("api/outage/", _outage_view),
    path("", include("config.urls")),
]


class FailingMiddleware:
    """Raises for every request, after the tenant middleware has opened its transaction."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith("/api/") or request.path.startswith("/admin/"):
            raise RuntimeError("secret detail of a middleware")
        return self.get_response(request)


class OutageMiddleware(FailingMiddleware):
    def __call__(self, request: HttpRequest) -> HttpResponse:
        raise OperationalError("the database went away") from psycopg.OperationalError("gone")


def _with(middleware: type) -> list[str]:
    name = f"{__name__}.{middleware.__name__}"
    return [*settings.MIDDLEWARE, name]


def _client(**kwargs: Any) -> APIClient:
    return APIClient(raise_request_exception=False, **kwargs)


def _shape(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"] == "application/json", response.content[:300]
    body: dict[str, Any] = response.json()
    assert set(body) == {"message", "code", "extra"}, body
    assert body["code"] == code
    assert b"<html" not in response.content.lower()
    assert b"Traceback" not in response.content
    return body


@pytest.mark.parametrize("debug", [True, False])
def test_a_failing_middleware_is_a_json_500_and_is_logged(tenant_a, caplog, debug) -> None:
    with (
        override_settings(DEBUG=debug, MIDDLEWARE=_with(FailingMiddleware)),
        caplog.at_level(logging.ERROR, logger="django.request"),
    ):
        client = token_client(tenant_a.users[Role.STAFF])
        client.raise_request_exception = False
        body = _shape(client.get(AGENTS), 500, "server_error")
        assert "secret detail" not in body["message"]
        # Pages outside the API keep Django's own answer.
        admin = _client().get("/admin/")
        assert admin.status_code == 500
        assert "json" not in admin["Content-Type"]
    assert "secret detail of a middleware" in caplog.text


@pytest.mark.parametrize("debug", [True, False])
def test_a_database_outage_in_a_middleware_is_a_json_503(db, debug) -> None:
    with override_settings(DEBUG=debug, MIDDLEWARE=_with(OutageMiddleware)):
        response = _client().get(AGENTS)
    _shape(response, 503, "database_unavailable")
    assert response["Retry-After"]


@pytest.mark.parametrize("debug", [True, False])
def test_an_exception_in_a_view_outside_drf_is_a_json_500(db, debug) -> None:
    with override_settings(DEBUG=debug, ROOT_URLCONF=__name__):
        _shape(_client().get("/api/boom/"), 500, "server_error")
        outage = _client().get("/api/outage/")
        _shape(outage, 503, "database_unavailable")
        # The project's own API still answers through this URL conf.
        _shape(_client().get(AGENTS), 401, "not_authenticated")


@pytest.mark.parametrize("debug", [True, False])
def test_django_404_under_api_is_json(db, debug) -> None:
    with override_settings(DEBUG=debug):
        body = _shape(_client().get("/api/nothing-here/"), 404, "not_found")
    assert body["message"] == "No such API endpoint."


def test_disallowed_host_under_api_is_a_json_400(db) -> None:
    response = _client().get(AGENTS, HTTP_HOST="evil.example")
    _shape(response, 400, "bad_request")


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("?status=%00", "status"),
        ("?ordering=name%00", "ordering"),
        ("?page=1&agent=a%00b", "agent"),
        ("?%00=1", "non_field_errors"),
    ],
)
def test_a_nul_in_an_api_query_is_a_400_naming_the_parameter(tenant_a, query, field) -> None:
    client = token_client(tenant_a.users[Role.STAFF])
    body = _shape(client.get(f"/api/v1/executions/{query}"), 400, "invalid")
    assert list(body["extra"]["fields"]) == [field]
    assert "Null characters are not allowed." in body["message"]


def test_a_nul_in_an_api_path_is_a_400(tenant_a) -> None:
    client = token_client(tenant_a.users[Role.STAFF])
    body = _shape(client.get("/api/v1/executions/a%00b/"), 400, "invalid")
    assert "path" in body["message"]


def test_api_successes_and_drf_errors_are_left_alone(tenant_a) -> None:
    client = token_client(tenant_a.users[Role.STAFF])
    assert client.get(AGENTS).status_code == 200
    _shape(client.post(AGENTS, {}, format="json"), 400, "invalid")
    docs = _client().get("/api/docs/")
    assert docs.status_code == 200
    assert "text/html" in docs["Content-Type"]
