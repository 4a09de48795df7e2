"""An agent's versions over REST: read-only, newest first, tenant-scoped; and the version each
execution ran on."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from agents.models import Agent, AgentVersion
from core import tenancy
from core.models import Role
from tests.agents.factories import ExecutionFactory
from tests.api.conftest import Tenant, agent_body, count, key_client, token_client

URL = "/api/v1/agents/"


def _agent_with_three_versions(tenant: Tenant) -> str:
    """Created, then edited twice through the API (versions 1 to 3)."""
    client = token_client(tenant.users[Role.STAFF])
    created = client.post(URL, agent_body(tenant), format="json")
    assert created.status_code == 201, created.json()
    agent_id = str(created.json()["id"])
    for change in ({"system_prompt": "Qualify leads, politely."}, {"max_steps_per_run": 4}):
        assert client.patch(f"{URL}{agent_id}/", change, format="json").status_code == 200
    # Not configuration: no version.
    assert client.post(f"{URL}{agent_id}/activate/").status_code == 200
    return agent_id


@pytest.mark.parametrize("role", list(Role))
def test_every_role_reads_the_versions_newest_first(tenant_a, as_role, role) -> None:
    agent_id = _agent_with_three_versions(tenant_a)
    client = as_role(role)

    listed = client.get(f"{URL}{agent_id}/versions/")

    assert listed.status_code == 200, listed.json()
    rows = listed.json()["results"]
    assert [(v["number"], v["is_current"]) for v in rows] == [(3, True), (2, False), (1, False)]
    assert [v["change_summary"] for v in rows] == [["max_steps_per_run"], ["system_prompt"], []]
    assert rows[0]["created_by"] == tenant_a.users[Role.STAFF].pk
    assert rows[0]["agent"] == agent_id
    assert "config" not in rows[0]  # the list stays light; the detail has it
    detail = client.get(f"{URL}{agent_id}/versions/2/")
    assert detail.status_code == 200
    body = detail.json()
    assert body["number"] == 2
    assert body["is_current"] is False
    assert body["restored_from"] is None
    assert body["config"]["system_prompt"] == "Qualify leads, politely."
    assert body["config"]["max_steps_per_run"] == 10
    ascending = client.get(f"{URL}{agent_id}/versions/", {"ordering": "number"}).json()
    assert [v["number"] for v in ascending["results"]] == [1, 2, 3]


def test_versions_are_read_only(tenant_a, as_role) -> None:
    agent_id = _agent_with_three_versions(tenant_a)
    client = as_role(Role.ADMIN)
    for path in (f"{URL}{agent_id}/versions/", f"{URL}{agent_id}/versions/1/"):
        for method in ("post", "put", "patch", "delete"):
            response = getattr(client, method)(path, {"config": {}}, format="json")
            assert response.status_code == 405, (method, path)
            assert response.json()["code"] == "method_not_allowed"
    assert count(AgentVersion, agent_id=agent_id) == 3


@pytest.mark.parametrize("number", ["4", "0", "-1", "two", "1.0", "99999999999999999999"])
def test_an_unknown_or_malformed_number_is_a_404(tenant_a, as_role, number) -> None:
    agent_id = _agent_with_three_versions(tenant_a)
    response = as_role(Role.VIEWER).get(f"{URL}{agent_id}/versions/{number}/")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_another_agencys_versions_are_a_404_like_a_missing_agent(tenant_a, tenant_b) -> None:
    theirs = _agent_with_three_versions(tenant_b)
    for client in (token_client(tenant_a.users[Role.ADMIN]), key_client(tenant_a.agency)):
        assert client.get(f"{URL}{theirs}/versions/").status_code == 404
        assert client.get(f"{URL}{theirs}/versions/1/").status_code == 404
    missing = "00000000-0000-0000-0000-000000000000"
    assert key_client(tenant_a.agency).get(f"{URL}{missing}/versions/").status_code == 404
    assert key_client(tenant_b.agency).get(f"{URL}{theirs}/versions/1/").status_code == 200


def test_anonymous_callers_are_refused(tenant_a) -> None:
    agent_id = _agent_with_three_versions(tenant_a)
    for path in (f"{URL}{agent_id}/versions/", f"{URL}{agent_id}/versions/1/"):
        assert APIClient().get(path).status_code == 401


def test_an_execution_names_the_version_it_ran_on(tenant_a, as_role) -> None:
    agent_id = _agent_with_three_versions(tenant_a)
    with tenancy.agency_context(tenant_a.agency.id):
        agent = Agent.objects.get(pk=agent_id)
        second = AgentVersion.objects.get(agent=agent, number=2)
    where = {"agent": agent, "agency": tenant_a.agency, "site": tenant_a.site}
    on_two = ExecutionFactory.create(**where, agent_version=second)
    old = ExecutionFactory.create(**where)  # started before versions were kept
    client = as_role(Role.VIEWER)

    listed = {
        e["id"]: e["agent_version"] for e in client.get("/api/v1/executions/").json()["results"]
    }
    by_agent = client.get(f"{URL}{agent_id}/executions/").json()["results"]

    assert listed == {str(on_two.id): 2, str(old.id): None}
    assert {e["id"]: e["agent_version"] for e in by_agent} == listed
    assert client.get(f"/api/v1/executions/{on_two.id}/").json()["agent_version"] == 2
