"""An agent's memories over REST: list and filters, search (`q`), create, delete."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from django.utils import timezone
from rest_framework.test import APIClient

from core import tenancy
from core.models import Role
from memory.models import Memory, MemoryType
from memory.services import memory_store
from tests.agents.factories import AgentFactory
from tests.api.conftest import count, fields_of
from tests.memory.factories import MemoryFactory

FACTS = [
    "Alice Moreau prefers to be contacted by e-mail, never by phone.",
    "Acme Corp renews its support contract every March.",
    "Bob Martin from Globex is allergic to peanuts.",
    "Quotes sent on Fridays are opened less often.",
]


def url(agent: Any, memory: Any = None) -> str:
    base = f"/api/v1/agents/{agent.id}/memories/"
    return f"{base}{memory.id}/" if memory is not None else base


def test_memories_of_the_agent_only_with_filters(tenant_a, as_role) -> None:
    agent = AgentFactory.create(agency=tenant_a.agency, site=tenant_a.site)
    other = AgentFactory.create(agency=tenant_a.agency, site=tenant_a.site)
    MemoryFactory.create(agent=agent, content="Prefers e-mail", memory_type="preference")
    MemoryFactory.create(agent=agent, content="Lives in Lyon", importance=9)
    MemoryFactory.create(agent=agent, content="Met at the fair", memory_type="relationship")
    MemoryFactory.create(agent=other, content="Not this one")
    client = as_role(Role.VIEWER)

    listed = client.get(url(agent)).json()["results"]
    assert {m["content"] for m in listed} == {"Prefers e-mail", "Lives in Lyon", "Met at the fair"}
    assert "embedding" not in listed[0]
    assert "search_vector" not in listed[0]
    assert listed[0]["score"] is None
    assert listed[0]["embedded"] is False

    def contents(**params: Any) -> set[str]:
        return {m["content"] for m in client.get(url(agent), params).json()["results"]}

    assert contents(min_importance=8) == {"Lives in Lyon"}
    assert contents(type=["preference", "relationship"]) == {"Prefers e-mail", "Met at the fair"}
    assert contents(memory_type="preference") == {"Prefers e-mail"}
    assert "type" in fields_of(client.get(url(agent), {"type": "dream"}))


def store_facts(agent: Any) -> list[Memory]:
    with tenancy.agency_context(agent.agency_id):
        return [
            memory_store(agent=agent, content=fact, memory_type=MemoryType.FACT).memory
            for fact in FACTS
        ]


def test_q_searches_by_meaning_best_first_without_counting_an_access(tenant_a, as_role) -> None:
    agent = AgentFactory.create(agency=tenant_a.agency, site=tenant_a.site)
    memories = store_facts(agent)

    response = as_role(Role.VIEWER).get(url(agent), {"q": "Which food can't Bob eat?", "k": 2})

    body = response.json()
    assert response.status_code == 200, body
    assert body["count"] == 2
    assert body["next"] is None
    first = body["results"][0]
    assert first["id"] == str(memories[2].id)
    assert first["similarity"] > 0.3
    assert first["score"] >= body["results"][1]["score"]
    assert first["embedded"] is True
    with tenancy.agency_context(agent.agency_id):
        assert Memory.objects.get(pk=memories[2].id).access_count == 0


def test_q_with_filters_and_bad_search_parameters(tenant_a, as_role) -> None:
    agent = AgentFactory.create(agency=tenant_a.agency, site=tenant_a.site)
    store_facts(agent)
    with tenancy.agency_context(agent.agency_id):
        memory_store(agent=agent, content="Bob likes green tea.", memory_type="preference")
    client = as_role(Role.VIEWER)

    only = client.get(url(agent), {"q": "Bob", "type": "preference", "k": 5}).json()
    assert [m["content"] for m in only["results"]] == ["Bob likes green tea."]
    assert "k" in fields_of(client.get(url(agent), {"q": "Bob", "k": 0}))
    assert "k" in fields_of(client.get(url(agent), {"q": "Bob", "k": 101}))
    assert "q" in fields_of(client.get(url(agent), {"q": "a\x00b"}))
    assert "q" in fields_of(client.get(url(agent), {"q": "x" * 2001}))
    with_q = client.get(url(agent), {"q": "Bob", "min_importance": 3})
    assert "min_importance" in fields_of(with_q, 422)
    assert "subject_id" in fields_of(client.get(url(agent), {"q": "Bob", "subject_id": "nope"}))


def test_staff_store_a_memory_embedded_after_the_request(
    tenant_a, as_role, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    agent = AgentFactory.create(agency=tenant_a.agency, site=tenant_a.site)
    body = {
        "content": "Initech pays by bank transfer.",
        "memory_type": "fact",
        "importance": 7,
        "tags": ["billing"],
        "expires_at": (timezone.now() + datetime.timedelta(days=30)).isoformat(),
    }
    client = as_role(Role.STAFF)
    with django_capture_on_commit_callbacks() as callbacks:
        created = client.post(url(agent), body, format="json")
    again = client.post(
        url(agent), {**body, "content": "initech pays by bank transfer."}, format="json"
    )

    assert created.status_code == 201, created.json()
    memory = created.json()
    assert (memory["importance"], memory["tags"], memory["source"]) == (7, ["billing"], "api")
    assert memory["embedded"] is False
    assert len(callbacks) == 1  # memory.embed_pending, after the commit
    assert again.status_code == 200  # the same text: the existing memory, reinforced
    assert again.json()["id"] == memory["id"]
    assert again.json()["access_count"] == 1
    assert count(Memory, agent=agent) == 1


def test_a_bad_memory_is_a_400_and_nothing_is_stored(tenant_a, as_role) -> None:
    agent = AgentFactory.create(agency=tenant_a.agency, site=tenant_a.site)
    client = as_role(Role.ADMIN)
    good = {"content": "A fact.", "memory_type": "fact"}
    past = (timezone.now() - datetime.timedelta(days=1)).isoformat()
    bad_bodies: list[tuple[dict[str, Any], str]] = [
        ({"memory_type": "dream"}, "memory_type"),
        ({"importance": 11}, "importance"),
        ({"confidence": 2}, "confidence"),
        ({"content": ""}, "content"),
        ({"expires_at": past}, "expires_at"),
        ({"tags": ["x" * 101]}, "tags"),
        ({"embedding": [0.1]}, "embedding"),
        ({"agent": str(agent.id)}, "agent"),
    ]
    for bad, field in bad_bodies:
        assert field in fields_of(client.post(url(agent), {**good, **bad}, format="json")), bad
    nul = client.post(url(agent), {**good, "content": "a\x00b"}, format="json")
    assert nul.status_code == 400  # refused by the JSON parser already
    assert count(Memory, agent=agent) == 0


def test_delete_forgets_the_memory(tenant_a, as_role) -> None:
    agent = AgentFactory.create(agency=tenant_a.agency, site=tenant_a.site)
    other = AgentFactory.create(agency=tenant_a.agency, site=tenant_a.site)
    memory, kept = store_facts(agent)[:2]
    theirs = MemoryFactory.create(agent=other)
    client = as_role(Role.STAFF)

    assert client.delete(url(other, memory)).status_code == 404  # not that agent's
    assert client.delete(url(agent, theirs)).status_code == 404
    assert client.delete(f"{url(agent)}nope/").status_code == 404
    response = client.delete(url(agent, memory))

    assert response.status_code == 204
    assert count(Memory, pk=memory.id) == 0
    assert count(Memory, pk=kept.id) == 1
    assert client.delete(url(agent, memory)).status_code == 404


def test_readers_cannot_write_memories(tenant_a, as_role) -> None:
    agent = AgentFactory.create(agency=tenant_a.agency, site=tenant_a.site)
    memory = MemoryFactory.create(agent=agent)
    for role in (Role.VIEWER, Role.APPROVER):
        client = as_role(role)
        body = {"content": "A fact.", "memory_type": "fact"}
        assert client.post(url(agent), body, format="json").status_code == 403
        assert client.delete(url(agent, memory)).status_code == 403
    assert count(Memory, agent=agent) == 1


def test_another_agencys_memories_are_a_404(tenant_a, tenant_b, as_role) -> None:
    theirs = AgentFactory.create(agency=tenant_b.agency, site=tenant_b.site)
    memory = MemoryFactory.create(agent=theirs)
    client = as_role(Role.ADMIN)
    assert client.get(url(theirs)).status_code == 404
    assert client.get(url(theirs), {"q": "anything"}).status_code == 404
    body = {"content": "Planted.", "memory_type": "fact"}
    assert client.post(url(theirs), body, format="json").status_code == 404
    assert client.delete(url(theirs, memory)).status_code == 404
    assert client.get("/api/v1/agents/nope/memories/").status_code == 404
    assert count(Memory, agent=theirs) == 1


def test_memories_need_a_credential(tenant_a) -> None:
    agent = AgentFactory.create(agency=tenant_a.agency, site=tenant_a.site)
    assert APIClient().get(url(agent)).status_code == 401
    assert APIClient().post(url(agent), {}, format="json").status_code == 401
