"""One error shape for everything, request size limits, the OpenAPI schema and the docs page."""

from __future__ import annotations

import json
import logging
import os
import uuid
from typing import Any

import pytest
from django.core.management import call_command
from drf_spectacular.drainage import GENERATOR_STATS
from rest_framework.test import APIClient

from agents.models import Agent
from core.api.exceptions import exception_handler
from core.exceptions import ApplicationError
from core.models import Event, Role
from tests.api.conftest import EXPECTED_OPERATIONS, count

AGENTS = "/api/v1/agents/"
EVENTS = "/api/v1/events/"


def _shape(response: Any) -> dict[str, Any]:
    body: dict[str, Any] = response.json()
    assert set(body) == {"message", "code", "extra"}, body
    assert body["message"]
    return body


def test_unknown_api_path_is_a_json_404(db) -> None:
    response = APIClient().post("/api/v1/nothing/here/")
    assert response.status_code == 404
    assert _shape(response)["code"] == "not_found"
    hint = APIClient().get("/api/v1/agents")
    assert "/api/v1/agents/" in _shape(hint)["message"]


def test_oversized_body_is_413_and_nothing_is_written(tenant_a, as_role) -> None:
    body = {"event_type": "form.submitted", "payload": {"blob": "x" * 300_000}}
    response = as_role(Role.STAFF).post(EVENTS, body, format="json")
    assert response.status_code == 413
    assert _shape(response)["code"] == "payload_too_large"
    assert count(Event) == 0


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("{not json", "JSON parse error"),
        ('{"event_type": "a.b", "payload": {"x": NaN}}', "JSON parse error"),
        ('{"event_type": "a.b", "payload": {"x": 1e999}}', "finite"),
        ('{"event_type": "a.b\\u0000c"}', "NUL"),
        ('{"event_type": "a.b", "payload": {"x": "\\ud800"}}', "surrogates"),
        ("[" * 40 + "]" * 40, "nested"),
        ("[" * 5000 + "]" * 5000, "nested"),
    ],
)
def test_unstorable_json_is_400_and_nothing_is_written(tenant_a, as_role, raw, why) -> None:
    response = as_role(Role.STAFF).post(EVENTS, raw, content_type="application/json")
    assert response.status_code == 400
    body = _shape(response)
    assert body["code"] == "parse_error"
    assert why in body["message"]
    assert count(Event) == 0


def test_form_bodies_are_415(tenant_a, as_role) -> None:
    response = as_role(Role.STAFF).post(EVENTS, {"event_type": "form.submitted"})
    assert response.status_code == 415
    assert _shape(response)["code"] == "unsupported_media_type"


def test_put_is_405_in_the_error_shape(tenant_a, as_role) -> None:
    response = as_role(Role.STAFF).put(f"{AGENTS}{uuid.uuid4()}/", {}, format="json")
    assert response.status_code == 405
    assert _shape(response)["code"] == "method_not_allowed"


def test_validation_errors_name_the_field_in_the_message(tenant_a, as_role) -> None:
    response = as_role(Role.STAFF).post(AGENTS, {"site": str(tenant_a.site.id)}, format="json")
    body = _shape(response)
    assert body["code"] == "invalid"
    assert body["message"].startswith("Invalid input. ")
    assert set(body["extra"]["fields"]) >= {"name", "agent_type", "system_prompt"}
    assert count(Agent) == 0


def test_unexpected_errors_are_logged_500s_without_internals(caplog) -> None:
    with caplog.at_level(logging.ERROR, logger="agentdesk.api"):
        response = exception_handler(RuntimeError("secret detail"), {"view": None})
    assert response.status_code == 500
    assert response.data["code"] == "server_error"
    assert "secret detail" not in json.dumps(response.data)
    assert "secret detail" in caplog.text


def test_application_errors_keep_code_status_and_extra() -> None:
    error = ApplicationError("already_decided", "Too late.", status=409, fields={"x": ["y"]})
    response = exception_handler(error, {})
    assert response.status_code == 409
    assert response.data == {
        "message": "Too late.",
        "code": "already_decided",
        "extra": {"fields": {"x": ["y"]}},
    }


def _schema() -> dict[str, Any]:
    response = APIClient().get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    schema: dict[str, Any] = json.loads(response.content)
    return schema


def test_schema_describes_every_operation_with_errors(db) -> None:
    schema = _schema()
    assert schema["openapi"].startswith("3.")
    operations = {
        op["operationId"]: op for path in schema["paths"].values() for op in path.values()
    }
    assert set(operations) == EXPECTED_OPERATIONS
    for name, operation in operations.items():
        assert operation.get("summary"), name
        for code in ("400", "401", "403"):
            content = operation["responses"][code]["content"]["application/json"]
            assert content["schema"] == {"$ref": "#/components/schemas/Error"}, (name, code)
    assert set(schema["components"]["securitySchemes"]) == {
        "agencyApiKey",
        "tokenAuth",
        "cookieAuth",
    }


def test_every_operation_refuses_anonymous_callers(db) -> None:
    client = APIClient()
    for path, methods in _schema()["paths"].items():
        url = path.replace("{id}", str(uuid.uuid4())).replace("{agent_id}", str(uuid.uuid4()))
        for method in methods:
            response = getattr(client, method)(url, {}, format="json")
            assert response.status_code == 401, (method, path, response.status_code)
            assert _shape(response)["code"] == "not_authenticated"


def test_docs_page_serves_its_assets_locally(db) -> None:
    response = APIClient().get("/api/docs/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "swagger-ui" in page
    assert "/static/drf_spectacular_sidecar/" in page
    assert "cdn" not in page.lower()
    asset = APIClient().get("/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")
    assert asset.status_code == 200


def test_the_schema_generates_without_a_warning_or_an_error(db) -> None:
    """drf-spectacular resolves a name clash (two serializers called ``Dataset``, two choice
    sets on fields called ``purpose``) with a warning and a schema where one operation answers
    as the other's component says; the contract and fuzz tests then fail far from the cause."""
    GENERATOR_STATS.reset()
    call_command("spectacular", "--fail-on-warn", "--file", os.devnull)  # raises on a warning
