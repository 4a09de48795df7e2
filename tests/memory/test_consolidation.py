"""Consolidation and pruning on beat (memory/consolidation.py), as seed 004 specifies: agents with
fewer than 100 memories are left alone; near-duplicates (of one subject) are merged into one, the
text written by the agent's model and the others deleted in the same transaction; memories of
importance below 3, used fewer than 2 times and older than 30 days are pruned; every change is
recorded with its reason."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import numpy as np
import pytest
from django.utils import timezone

from agents.models import Agent, LLMProvider
from core import tenancy
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import text_reply
from memory import consolidation, embeddings
from memory.models import Memory, MemoryChange, MemoryChangeAction
from tests.agents.factories import AgentFactory
from tests.factories import AgencyFactory, SiteFactory
from tests.memory.factories import MemoryFactory

pytestmark = pytest.mark.django_db

MERGED = "Alice Moreau wants e-mail only, in French, never a phone call."
RNG = np.random.default_rng(17)


@pytest.fixture
def agent(fake_llm_server: FakeProviderServer) -> Agent:
    """An agent whose model is the fake provider's (its own script), answering merges."""
    agency = AgencyFactory.create()
    site = SiteFactory.create(agency=agency)
    with tenancy.agency_context(agency.id):
        provider = LLMProvider(
            agency=agency, provider_name="openai", api_endpoint=fake_llm_server.openai_base_url
        )
        provider.set_api_key("test-key-not-real")
        provider.save()
    made = AgentFactory.create(
        agency=agency, site=site, llm_provider="openai", llm_model=f"fake-{uuid.uuid4().hex[:10]}"
    )
    fake_llm_server.set_responder(lambda request: text_reply(MERGED), key=made.llm_model)
    return made


def _unit(vector: np.ndarray) -> list[float]:
    return [float(x) for x in vector / np.linalg.norm(vector)]


def _random() -> np.ndarray:
    return RNG.normal(size=embeddings.DIMENSIONS)


def memories(agent: Agent, count: int, **fields: Any) -> list[Memory]:
    """``count`` memories with random (unrelated) embeddings of the agency's model."""
    model = embeddings.model_for(agent.agency_id)
    with tenancy.agency_context(agent.agency_id):
        return [
            MemoryFactory.create(
                agent=agent, embedding=_unit(_random()), embedding_model=model, **fields
            )
            for _ in range(count)
        ]


def near_duplicates(agent: Agent, contents: list[str], **fields: Any) -> list[Memory]:
    """Memories whose embeddings are within a little noise of one another (similarity ~0.99)."""
    model = embeddings.model_for(agent.agency_id)
    base = _random()
    made = []
    with tenancy.agency_context(agent.agency_id):
        for index, content in enumerate(contents):
            noise = _random() * 0.05
            values = {"importance": 5, **{k: v[index] for k, v in fields.items()}}
            made.append(
                MemoryFactory.create(
                    agent=agent,
                    content=content,
                    embedding=_unit(base + noise),
                    embedding_model=model,
                    **values,
                )
            )
    return made


def aged(memory: Memory, days: int) -> None:
    with tenancy.agency_context(memory.agency_id):
        Memory.objects.filter(pk=memory.pk).update(
            created_at=timezone.now() - datetime.timedelta(days=days)
        )


def contents(agent: Agent) -> set[str]:
    with tenancy.agency_context(agent.agency_id):
        return set(Memory.objects.filter(agent=agent).values_list("content", flat=True))


def changes(agent: Agent) -> list[MemoryChange]:
    with tenancy.agency_context(agent.agency_id):
        return list(MemoryChange.objects.filter(agent=agent).order_by("created_at"))


ALICE = [
    "Alice Moreau prefers e-mail.",
    "Alice Moreau wants to be written to in French.",
    "Never phone Alice Moreau.",
]


def test_an_agent_with_fewer_than_100_memories_is_left_alone(
    agent: Agent, fake_llm_server: FakeProviderServer
) -> None:
    near_duplicates(agent, ALICE[:2])
    old = memories(agent, 97, importance=1)[0]
    aged(old, 90)

    done = consolidation.consolidate_agent(agent_id=agent.id, agency_id=agent.agency_id)

    assert done.skipped == "99 memories"
    assert len(contents(agent)) == 99
    assert fake_llm_server.requests_for(agent.llm_model) == []


def test_near_duplicates_are_merged_into_the_most_important_with_the_models_text(
    agent: Agent, fake_llm_server: FakeProviderServer
) -> None:
    memories(agent, 97)
    low, keeper, mid = near_duplicates(
        agent, ALICE, importance=[4, 7, 5], access_count=[1, 2, 3], tags=[["a"], ["b"], ["a"]]
    )

    done = consolidation.consolidate_agent(agent_id=agent.id, agency_id=agent.agency_id)

    assert (done.merges, done.merged, done.pruned) == (1, 2, 0)
    (request,) = fake_llm_server.requests_for(agent.llm_model)
    assert all(text in request.messages[-1]["content"] for text in ALICE)
    with tenancy.agency_context(agent.agency_id):
        assert not Memory.objects.filter(pk__in=[low.pk, mid.pk]).exists()
        merged = Memory.objects.get(pk=keeper.pk)
    assert merged.content == MERGED
    assert merged.importance == 7
    assert merged.access_count == 6
    assert merged.tags == ["b", "a"]
    assert merged.embedding_model == embeddings.model_for(agent.agency_id)
    assert merged.embedding is not None
    assert keeper.embedding is not None
    assert not np.allclose(merged.embedding, keeper.embedding)  # embedded again
    (change,) = changes(agent)
    assert change.action == MemoryChangeAction.MERGE
    assert change.memory_id == keeper.pk
    assert set(change.memory_ids) == {low.pk, keeper.pk, mid.pk}
    assert change.before[0]["content"] == ALICE[1]  # the kept one, as it was
    assert {snapshot["content"] for snapshot in change.before} == set(ALICE)
    assert change.after is not None
    assert change.after["content"] == MERGED
    assert "3 memories" in change.reason
    assert change.actor == "consolidation"
    assert len(contents(agent)) == 98


def test_a_merge_that_fails_midway_changes_nothing(
    agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    memories(agent, 98)
    near_duplicates(agent, ALICE[:2])

    def broken(**kwargs: Any) -> None:
        raise RuntimeError("the change record could not be written")

    monkeypatch.setattr("memory.services.memory_change_record", broken)
    done = consolidation.consolidate_agent(agent_id=agent.id, agency_id=agent.agency_id)

    assert done.merges == 0
    assert done.errors
    assert set(ALICE[:2]) <= contents(agent)  # neither rewritten nor deleted
    assert MERGED not in contents(agent)


def test_memories_about_different_subjects_are_not_merged(
    agent: Agent, fake_llm_server: FakeProviderServer
) -> None:
    memories(agent, 98)
    near_duplicates(
        agent,
        ["Prefers e-mail.", "Prefers e-mail."],
        subject_type=["contact", "contact"],
        subject_id=[uuid.uuid4(), uuid.uuid4()],
    )

    done = consolidation.consolidate_agent(agent_id=agent.id, agency_id=agent.agency_id)

    assert done.merges == 0
    assert fake_llm_server.requests_for(agent.llm_model) == []


def test_unimportant_rarely_used_old_memories_are_pruned_with_the_reason(agent: Agent) -> None:
    memories(agent, 96)
    (pruned,) = memories(agent, 1, importance=2, access_count=1, content="Old trivia.")
    kept = [
        *memories(agent, 1, importance=3, access_count=0),  # important enough
        *memories(agent, 1, importance=2, access_count=2),  # used enough
    ]
    young = memories(agent, 1, importance=1, access_count=0)[0]
    for memory in (pruned, *kept):
        aged(memory, 31)
    aged(young, 29)

    done = consolidation.consolidate_agent(agent_id=agent.id, agency_id=agent.agency_id)

    assert done.pruned == 1
    with tenancy.agency_context(agent.agency_id):
        assert not Memory.objects.filter(pk=pruned.pk).exists()
        assert Memory.objects.filter(pk__in=[m.pk for m in (*kept, young)]).count() == 3
    (change,) = changes(agent)
    assert change.action == MemoryChangeAction.PRUNE
    assert change.memory_ids == [pruned.pk]
    assert change.memory_id is None
    assert change.before[0]["content"] == "Old trivia."
    assert "importance 2 (below 3)" in change.reason
    assert "used 1 time(s) (fewer than 2)" in change.reason


def test_a_later_tick_compares_only_what_changed_since(
    agent: Agent, fake_llm_server: FakeProviderServer
) -> None:
    memories(agent, 100)
    consolidation.consolidate_agent(agent_id=agent.id, agency_id=agent.agency_id)
    with tenancy.agency_context(agent.agency_id):
        agent.refresh_from_db()
    assert agent.memory_consolidated_at is not None

    again = consolidation.consolidate_agent(agent_id=agent.id, agency_id=agent.agency_id)
    near_duplicates(agent, ALICE[:2])
    merged = consolidation.consolidate_agent(agent_id=agent.id, agency_id=agent.agency_id)

    assert (again.merges, merged.merges) == (0, 1)
    assert len(fake_llm_server.requests_for(agent.llm_model)) == 1


def test_beat_consolidates_each_agent_with_enough_memories(
    agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = AgentFactory.create(agency=agent.agency, site=agent.site)
    memories(agent, 100)
    memories(small, 3)
    seen: list[uuid.UUID] = []

    def record(*, agent_id: uuid.UUID, agency_id: uuid.UUID) -> consolidation.Consolidated:
        seen.append(agent_id)
        return consolidation.Consolidated()

    monkeypatch.setattr(consolidation, "consolidate_agent", record)
    consolidation.consolidate_all()

    assert agent.id in seen
    assert small.id not in seen
