"""The memory admin: search by meaning once an agent is picked, edit (embedded again after the
request), add, delete for good; what consolidation changed, read-only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from agents.models import Agent
from core import tenancy
from core.models import Agency, Role, User
from memory.models import Memory, MemoryChange, MemoryType
from memory.services import memory_store
from tests.admin.helpers import admin_url, change_url
from tests.agents.factories import AgentFactory
from tests.factories import AgencyFactory, MembershipFactory
from tests.memory.factories import MemoryChangeFactory, MemoryFactory

pytestmark = pytest.mark.django_db

FACTS = [
    "Alice Moreau prefers to be contacted by e-mail, never by phone.",
    "Acme Corp renews its support contract every March.",
    "Bob Martin from Globex is allergic to peanuts.",
    "Quotes sent on Fridays are opened less often.",
]


@pytest.fixture
def agency() -> Agency:
    return AgencyFactory.create()


@pytest.fixture
def agent(agency: Agency) -> Agent:
    return AgentFactory.create(agency=agency)


@pytest.fixture
def client(agency: Agency) -> Client:
    client = Client()
    client.force_login(MembershipFactory.create(agency=agency, role=Role.STAFF).user)
    return client


def fetch(**lookup: Any) -> Memory | None:
    with tenancy.platform_context():
        return Memory.objects.filter(**lookup).first()


def store_facts(agent: Agent) -> list[Memory]:
    with tenancy.agency_context(agent.agency_id):
        return [
            memory_store(agent=agent, content=fact, memory_type=MemoryType.FACT).memory
            for fact in FACTS
        ]


def test_the_search_box_searches_by_meaning_for_the_picked_agent(
    agent: Agent, client: Client
) -> None:
    memories = store_facts(agent)
    other = AgentFactory.create(agency=agent.agency, site=agent.site)
    MemoryFactory.create(agent=other, content="Bob Martin cannot eat peanuts.")

    page = client.get(
        admin_url(Memory, "changelist"),
        {"q": "Which food can't Bob eat?", "agent__id__exact": str(agent.id)},
    )

    html = page.content.decode()
    assert page.status_code == 200
    assert html.index(str(memories[2].id)) < html.index(str(memories[0].id))
    assert "Bob Martin cannot eat peanuts." not in html  # another agent's
    assert "Score" in html


def test_without_an_agent_the_search_box_matches_words(agent: Agent, client: Client) -> None:
    store_facts(agent)

    page = client.get(admin_url(Memory, "changelist"), {"q": "peanuts"})

    html = page.content.decode()
    assert page.status_code == 200
    assert "allergic to peanuts" in html
    assert "Acme Corp" not in html
    assert "Pick an agent in the filter to search by meaning." in html


def test_staff_edit_a_memory_and_its_embedding_waits_for_the_task(
    agent: Agent, client: Client, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    memory = store_facts(agent)[1]
    form = {
        "memory_type": "fact",
        "content": "Acme Corp renews its support contract every April.",
        "subject_type": "",
        "subject_id": "",
        "confidence": "0.90",
        "importance": "8",
        "tags": "renewal",
        "expires_at_0": "",
        "expires_at_1": "",
        "source": "",
        "metadata": "{}",
    }
    with django_capture_on_commit_callbacks() as callbacks:
        response = client.post(change_url(memory), form)

    assert response.status_code == 302, response.content.decode()[:3000]
    saved = fetch(pk=memory.pk)
    assert saved is not None
    assert saved.content == form["content"]
    assert (saved.importance, saved.tags, str(saved.confidence)) == (8, ["renewal"], "0.90")
    assert saved.embedding is None
    assert saved.embedding_model == ""
    assert len(callbacks) == 1


def test_a_bad_edit_is_a_form_error(agent: Agent, client: Client) -> None:
    memory = store_facts(agent)[1]
    form = {
        "memory_type": "fact",
        "content": "bad\x00text",
        "confidence": "0.80",
        "importance": "5",
        "tags": "",
        "metadata": "{}",
    }
    response = client.post(change_url(memory), form)

    assert response.status_code == 200
    saved = fetch(pk=memory.pk)
    assert saved is not None
    assert saved.content == FACTS[1]


def test_staff_add_a_memory(agent: Agent, client: Client) -> None:
    form = {
        "agent": str(agent.id),
        "memory_type": "preference",
        "content": "Carol prefers calls after 4 pm.",
        "subject_type": "",
        "subject_id": "",
        "confidence": "0.80",
        "importance": "5",
        "tags": "",
        "expires_at_0": "",
        "expires_at_1": "",
        "source": "",
        "metadata": "{}",
    }
    response = client.post(admin_url(Memory, "add"), form)

    assert response.status_code == 302, response.content.decode()[:3000]
    saved = fetch(content="Carol prefers calls after 4 pm.")
    assert saved is not None
    assert (saved.agent_id, saved.site_id, saved.source) == (agent.id, agent.site_id, "admin")


def test_delete_in_the_admin_forgets_the_memory(agent: Agent, client: Client) -> None:
    memory = store_facts(agent)[2]
    change = MemoryChangeFactory.create(agent=agent, memory_ids=[memory.id])

    response = client.post(admin_url(memory, "delete", memory.pk), {"post": "yes"})

    assert response.status_code == 302
    assert fetch(pk=memory.pk) is None
    with tenancy.platform_context():
        assert not MemoryChange.objects.filter(pk=change.pk).exists()


def test_bulk_delete_forgets_each_memory(agent: Agent, client: Client) -> None:
    memories = store_facts(agent)[:2]
    response = client.post(
        admin_url(Memory, "changelist"),
        {
            "action": "delete_selected",
            "_selected_action": [str(m.pk) for m in memories],
            "post": "yes",
        },
    )
    assert response.status_code == 302
    assert fetch(pk=memories[0].pk) is None
    assert fetch(pk=memories[1].pk) is None


def test_memory_changes_are_read_only_and_say_why(
    agent: Agent, client: Client, agency: Agency
) -> None:
    memory = store_facts(agent)[0]
    change = MemoryChangeFactory.create(
        agent=agent,
        memory=memory,
        memory_ids=[memory.id],
        reason="Merged two near-duplicates (similarity 0.97).",
        before=[{"content": "Alice likes e-mail."}],
    )
    changelist = client.get(admin_url(MemoryChange, "changelist")).content.decode()
    detail = client.get(change_url(change))
    memory_page = client.get(change_url(memory)).content.decode()

    assert "Merged two near-duplicates" in changelist
    assert detail.status_code == 200
    assert "Alice likes e-mail." in detail.content.decode()
    assert 'name="_save"' not in detail.content.decode()
    assert client.get(admin_url(MemoryChange, "add")).status_code == 403
    assert str(change.pk) in memory_page  # linked from the memory it changed


def test_viewers_browse_but_do_not_change(agent: Agent, agency: Agency) -> None:
    memory = store_facts(agent)[0]
    viewer: User = MembershipFactory.create(agency=agency, role=Role.VIEWER).user
    client = Client()
    client.force_login(viewer)

    assert client.get(admin_url(Memory, "changelist")).status_code == 200
    assert client.post(admin_url(memory, "delete", memory.pk), {"post": "yes"}).status_code == 403
    assert fetch(pk=memory.pk) is not None


def test_the_list_cuts_long_memories_and_reasons_after_a_whole_word(
    agent: Agent, client: Client
) -> None:
    # The review's row: cut at 80 characters, the list read "... an outreach e-mail (“A quick
    # idea fo".
    content = (
        "Sent Sofia Lindqvist (Fjord & Field Studio) an outreach e-mail (“A quick idea for "
        "Fjord & Field”) about the 12-seat plan."
    )
    reason = "Merged two memories about the same contact: " + "the same fact again, " * 8
    with tenancy.agency_context(agent.agency_id):
        MemoryFactory.create(agent=agent, content=content, memory_type=MemoryType.OUTCOME)
        MemoryChangeFactory.create(agent=agent, reason=reason)

    memories = client.get(admin_url(Memory, "changelist")).content.decode()
    shown = "[outcome] Sent Sofia Lindqvist (Fjord &amp; Field Studio) an outreach e-mail (“A quick"
    assert f"{shown} idea…</a>" in memories
    assert "idea fo" not in memories
    changes = client.get(admin_url(MemoryChange, "changelist")).content.decode()
    shown = reason[:119].rsplit(" ", 1)[0].rstrip(", ")
    assert f"{shown}…" in changes
