"""An agent's memories over REST (read-only)."""

from __future__ import annotations

from core.models import Role
from tests.agents.factories import AgentFactory
from tests.api.conftest import fields_of
from tests.memory.factories import MemoryFactory


def test_memories_of_the_agent_only_with_filters(tenant_a, as_role) -> None:
    agent = AgentFactory.create(agency=tenant_a.agency, site=tenant_a.site)
    other = AgentFactory.create(agency=tenant_a.agency, site=tenant_a.site)
    MemoryFactory.create(agent=agent, content="Prefers e-mail", memory_type="preference")
    MemoryFactory.create(agent=agent, content="Lives in Lyon", importance=9)
    MemoryFactory.create(agent=other, content="Not this one")
    url = f"/api/v1/agents/{agent.id}/memories/"
    client = as_role(Role.VIEWER)
    assert {m["content"] for m in client.get(url).json()["results"]} == {
        "Prefers e-mail",
        "Lives in Lyon",
    }
    assert [m["content"] for m in client.get(url, {"min_importance": 8}).json()["results"]] == [
        "Lives in Lyon"
    ]
    assert "embedding" not in client.get(url).json()["results"][0]
    assert "memory_type" in fields_of(client.get(url, {"memory_type": "dream"}))


def test_another_agencys_memories_are_a_404(tenant_a, tenant_b, as_role) -> None:
    theirs = AgentFactory.create(agency=tenant_b.agency, site=tenant_b.site)
    MemoryFactory.create(agent=theirs)
    response = as_role(Role.ADMIN).get(f"/api/v1/agents/{theirs.id}/memories/")
    assert response.status_code == 404
    assert as_role(Role.ADMIN).get("/api/v1/agents/nope/memories/").status_code == 404


def test_memories_need_a_credential(tenant_a) -> None:
    from rest_framework.test import APIClient

    agent = AgentFactory.create(agency=tenant_a.agency, site=tenant_a.site)
    assert APIClient().get(f"/api/v1/agents/{agent.id}/memories/").status_code == 401
