"""Agents over REST: CRUD with ai.agent.* events, bad input, tenancy and roles."""

from __future__ import annotations

import pytest

from agents.models import Agent
from core import tenancy
from core.models import Event, Role
from tests.agents.factories import AgentFactory
from tests.api.conftest import agent_body, count, fields_of, token_client

URL = "/api/v1/agents/"


def test_create_get_patch_delete_emit_agent_events(tenant_a, as_role) -> None:
    client = as_role(Role.STAFF)
    created = client.post(URL, agent_body(tenant_a, allowed_tools=["crm_*"]), format="json")
    assert created.status_code == 201, created.json()
    agent_id = created.json()["id"]
    assert created.json()["slug"] == "lead-qualifier"
    assert client.get(f"{URL}{agent_id}/").json()["name"] == "Lead qualifier"

    patched = client.patch(f"{URL}{agent_id}/", {"temperature": "0.20"}, format="json")
    assert patched.status_code == 200
    assert patched.json()["temperature"] == "0.20"
    assert client.post(f"{URL}{agent_id}/activate/").json()["is_active"] is True
    assert client.post(f"{URL}{agent_id}/deactivate/").json()["is_active"] is False
    assert client.delete(f"{URL}{agent_id}/").status_code == 204
    assert count(Agent, pk=agent_id) == 0
    with tenancy.agency_context(tenant_a.agency.id):
        logged = list(Event.objects.order_by("created_at").values_list("event_type", flat=True))
    assert logged == [
        "ai.agent.created",
        "ai.agent.updated",
        "ai.agent.updated",
        "ai.agent.activated",
        "ai.agent.updated",
        "ai.agent.deactivated",
        "ai.agent.deleted",
    ]


def test_list_filters_orders_and_paginates(tenant_a, as_role) -> None:
    for name in ("Bravo", "Alpha", "Charlie"):
        AgentFactory.create(agency=tenant_a.agency, site=tenant_a.site, name=name)
    AgentFactory.create(agency=tenant_a.agency, site=tenant_a.site, name="Off", is_active=False)
    client = as_role(Role.VIEWER)
    page = client.get(URL, {"is_active": "true", "ordering": "-name", "page_size": 2}).json()
    assert page["count"] == 3
    assert [a["name"] for a in page["results"]] == ["Charlie", "Bravo"]
    assert client.get(URL, {"q": "alp"}).json()["count"] == 1
    assert client.get(URL, {"page": 99}).status_code == 404


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"surprise": 1}, "surprise"),  # unknown field
        ({"id": "00000000-0000-0000-0000-000000000000"}, "id"),  # read-only field
        ({"max_tokens": "lots"}, "max_tokens"),  # wrong type
        ({"max_steps_per_run": 0}, "max_steps_per_run"),  # below the database's CHECK
        ({"temperature": "2.5"}, "temperature"),
        ({"agent_type": "wizard"}, "agent_type"),
        ({"allowed_tools": ["crm_**"]}, "allowed_tools"),  # invalid wildcard pattern
        ({"denied_tools": "crm_*"}, "denied_tools"),  # a string, not a list
        ({"site": "not-a-uuid"}, "site"),
        ({"system_prompt": "x" * 50_001}, "system_prompt"),  # oversized field
        ({"examples": [{"text": "x" * 70_000}]}, "examples"),
    ],
)
def test_bad_input_is_a_field_error_and_writes_nothing(tenant_a, as_role, extra, field) -> None:
    response = as_role(Role.STAFF).post(URL, agent_body(tenant_a, **extra), format="json")
    assert field in fields_of(response)
    assert count(Agent, agency=tenant_a.agency) == 0
    assert count(Event, agency=tenant_a.agency) == 0


def test_duplicate_slug_per_site_is_a_field_error(tenant_a, as_role) -> None:
    AgentFactory.create(agency=tenant_a.agency, site=tenant_a.site, slug="taken")
    response = as_role(Role.STAFF).post(URL, agent_body(tenant_a, slug="taken"), format="json")
    assert "slug" in fields_of(response, 409)
    assert count(Agent, agency=tenant_a.agency) == 1


def test_patch_with_bad_input_changes_nothing(tenant_a, as_role) -> None:
    agent = AgentFactory.create(agency=tenant_a.agency, site=tenant_a.site, name="Same")
    response = as_role(Role.STAFF).patch(
        f"{URL}{agent.id}/", {"name": "Changed", "trigger_schedule": "61 * * * *"}, format="json"
    )
    assert "trigger_schedule" in fields_of(response, 422)  # a cron rule: 422
    assert count(Agent, pk=agent.id, name="Same") == 1


def test_site_of_another_agency_does_not_exist(tenant_a, tenant_b, as_role) -> None:
    body = {**agent_body(tenant_a), "site": str(tenant_b.site.id)}
    assert "site" in fields_of(as_role(Role.STAFF).post(URL, body, format="json"), 422)
    assert count(Agent) == 0


def test_another_agencys_agent_is_a_404_everywhere(tenant_a, tenant_b, as_role) -> None:
    theirs = AgentFactory.create(agency=tenant_b.agency, site=tenant_b.site, name="Theirs")
    client = as_role(Role.ADMIN)
    assert client.get(URL).json()["count"] == 0
    for method, suffix in [
        ("get", ""),
        ("patch", ""),
        ("delete", ""),
        ("post", "execute/"),
        ("post", "activate/"),
        ("post", "deactivate/"),
        ("get", "executions/"),
        ("get", "memories/"),
    ]:
        response = getattr(client, method)(f"{URL}{theirs.id}/{suffix}", {}, format="json")
        assert response.status_code == 404, (method, suffix)
        assert response.json()["code"] == "not_found"
    assert count(Agent, pk=theirs.id, name="Theirs") == 1


@pytest.mark.parametrize("role", [Role.VIEWER, Role.APPROVER])
def test_readers_cannot_write_agents(tenant_a, as_role, role) -> None:
    agent = AgentFactory.create(agency=tenant_a.agency, site=tenant_a.site)
    client = as_role(role)
    assert client.get(f"{URL}{agent.id}/").status_code == 200
    assert client.post(URL, agent_body(tenant_a), format="json").status_code == 403
    for method, suffix in [
        ("patch", ""),
        ("delete", ""),
        ("post", "execute/"),
        ("post", "activate/"),
    ]:
        response = getattr(client, method)(f"{URL}{agent.id}/{suffix}", {}, format="json")
        assert response.status_code == 403, (method, suffix)
        assert response.json()["code"] == "permission_denied"
    assert count(Agent, agency=tenant_a.agency) == 1


def test_a_user_without_membership_gets_403(db) -> None:
    from tests.factories import UserFactory

    response = token_client(UserFactory.create()).get(URL)
    assert response.status_code == 403
