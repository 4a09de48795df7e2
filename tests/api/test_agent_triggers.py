"""An agent's triggers over REST: conditions, event types and cron expressions that could never
fire are a 400 naming the field, and a manual run whose delivery fails (broker down) is still
a 202 with the one run it committed, which beat's reaper delivers later."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from kombu.exceptions import OperationalError

from agents.models import Agent, Execution, ExecutionStatus
from config.celery_app import app
from core.models import Role
from tests.agents.factories import AgentFactory
from tests.api.conftest import Tenant, agent_body, count, fields_of, make_tenant, token_client

URL = "/api/v1/agents/"


# The schema states event names (a pattern: 400); conditions and cron expressions are rules it
# cannot state (422).
BAD_TRIGGERS = [
    ({"trigger_conditions": {"source": {"is": "web"}}}, "trigger_conditions", "dotted key", 422),
    ({"trigger_conditions": {"contact..country": "DE"}}, "trigger_conditions", "payload key", 422),
    ({"trigger_conditions": {"source": []}}, "trigger_conditions", "never matches", 422),
    ({"trigger_events": ["CRM Contact Created"]}, "trigger_events", "not an event type", 400),
    ({"trigger_events": ["crm.contact.created", "auth*"]}, "trigger_events", "wildcard", 400),
    ({"trigger_schedule": "1,,2 * * * *"}, "trigger_schedule", "Invalid cron expression", 422),
    ({"input_schema": {"type": "string"}}, "input_schema", '"type": "object"', 422),
    (
        {"input_schema": {"type": "object", "properties": {"input": {}}}},
        "input_schema",
        "'input' cannot be declared",
        422,
    ),
    (
        {"input_schema": {"type": "object", "properties": {"a": {"type": 5}}}},
        "input_schema",
        "Not a valid JSON Schema",
        422,
    ),
]


@pytest.mark.parametrize(("extra", "field", "message", "status"), BAD_TRIGGERS)
def test_create_with_a_trigger_that_could_never_fire_is_refused(
    tenant_a: Tenant, as_role: Any, *, extra: dict[str, Any], field: str, message: str, status: int
) -> None:
    response = as_role(Role.STAFF).post(URL, agent_body(tenant_a, **extra), format="json")
    errors = fields_of(response, status)
    assert any(message in m for m in errors[field]), errors
    assert count(Agent, agency=tenant_a.agency) == 0


@pytest.mark.parametrize(("extra", "field", "message", "status"), BAD_TRIGGERS)
def test_patch_with_a_trigger_that_could_never_fire_is_refused(
    tenant_a: Tenant, as_role: Any, *, extra: dict[str, Any], field: str, message: str, status: int
) -> None:
    agent = AgentFactory.create(agency=tenant_a.agency, site=tenant_a.site)
    response = as_role(Role.STAFF).patch(f"{URL}{agent.id}/", extra, format="json")
    assert any(message in m for m in fields_of(response, status)[field])
    assert count(Agent, pk=agent.pk, trigger_events=[], trigger_schedule="") == 1


def test_valid_conditions_and_event_types_are_stored(tenant_a: Tenant, as_role: Any) -> None:
    conditions = {"source": "web", "contact.country": ["AT", "DE"], "vip": True}
    body = agent_body(
        tenant_a, trigger_events=["crm.contact.created"], trigger_conditions=conditions
    )
    response = as_role(Role.STAFF).post(URL, body, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["trigger_conditions"] == conditions


def test_execute_with_the_broker_down_is_202_with_one_pending_run(
    live_db: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The run commits before its message is sent: a failed send must not make the request fail
    (the client would retry and start it twice); the reaper delivers a run left pending."""
    tenant = make_tenant()
    agent = AgentFactory.create(agency=tenant.agency, site=tenant.site)
    sent: list[str] = []

    def broker_down(name: str, *args: Any, **kwargs: Any) -> None:
        sent.append(name)
        raise OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    # The boundary every task send goes through (Task.apply_async calls it).
    monkeypatch.setattr(app, "send_task", broker_down)
    client = token_client(tenant.users[Role.STAFF])
    with caplog.at_level(logging.WARNING, logger="core.sending"):
        response = client.post(f"{URL}{agent.id}/execute/", {"input": "Go."}, format="json")
    assert response.status_code == 202, response.content
    assert sent == ["agents.run_execution"]
    execution_id = response.json()["execution_id"]
    assert count(Execution, agent=agent) == 1
    assert count(Execution, pk=execution_id, status=ExecutionStatus.PENDING) == 1
    assert f"execution {execution_id}: agents.run_execution not sent" in caplog.text
