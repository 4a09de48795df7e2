"""Run-start recall (agents/runtime/setup.py) with the real local embedding model: a run's system
prompt carries the memories most relevant to its instruction and its most similar past runs,
within the agent's memory_token_budget; expired memories and unrelated ones stay out; the recent
conversation of the same session comes before the instruction."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.utils import timezone

from agents.models import Agent, Execution, ExecutionStatus
from agents.runtime import setup
from agents.runtime.context_window import CHARS_PER_TOKEN
from agents.runtime.loop import run_execution
from core import tenancy
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import text_reply
from memory import embeddings
from memory.models import Memory, MemoryType
from memory.services import memory_store
from tests.agents.factories import AgentFactory, ExecutionFactory
from tests.memory.factories import EpisodeFactory
from tests.memory.runs import complete_episode, run_to_end
from tests.processes import pending_execution

ALLERGY = "Bob Martin from Globex is allergic to peanuts."
FACTS = [
    "The customer Alice Moreau prefers to be contacted by e-mail, never by phone.",
    "Acme Corp renews its support contract every March.",
    ALLERGY,
    "Quotes sent on Fridays are opened less often than those sent on Tuesdays.",
]
LUNCH = "Bob from Globex comes to lunch on Thursday: order food he can eat."


def _store(agent: Agent, facts: list[str] = FACTS, **fields: Any) -> list[Memory]:
    with tenancy.agency_context(agent.agency_id):
        return [
            memory_store(agent=agent, content=f, memory_type=MemoryType.FACT, **fields).memory
            for f in facts
        ]


def _snapshot(agent: Agent, **fields: Any) -> dict[str, Any]:
    with tenancy.agency_context(agent.agency_id):
        execution = ExecutionFactory.create(agent=agent, **fields)
        return dict(setup.build_snapshot(agent, execution))


def test_a_runs_system_prompt_carries_the_relevant_memory(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer
) -> None:
    agent = make_agent()
    _store(agent)
    fake_llm_server.set_responder(
        lambda request: text_reply("Salad, no nuts."), key=agent.llm_model
    )
    execution = pending_execution(agent, input_text=LUNCH)

    run_execution(execution.id, agency_id=execution.agency_id)

    with tenancy.agency_context(agent.agency_id):
        execution = Execution.objects.get(pk=execution.pk)
    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    (request,) = fake_llm_server.requests_for(agent.llm_model)
    system = request.system or ""
    assert "## Relevant Context from Memory" in system
    assert f"- [fact] {ALLERGY}" in system
    assert FACTS[3] not in system  # unrelated to lunch
    assert execution.config_snapshot["memories"][0] == f"[fact] {ALLERGY}"


@pytest.mark.django_db
def test_recall_stays_within_the_memory_token_budget() -> None:
    agent = AgentFactory.create(memory_token_budget=15)  # 60 characters: one memory line
    _store(agent, [ALLERGY, "Bob Martin from Globex also avoids shellfish and sesame."])

    snapshot = _snapshot(agent, input=LUNCH)

    assert len(snapshot["memories"]) == 1
    assert sum(len(line) for line in snapshot["memories"]) <= 15 * CHARS_PER_TOKEN


@pytest.mark.django_db
def test_only_the_memories_given_to_the_run_count_as_used() -> None:
    agent = AgentFactory.create(memory_token_budget=15)
    _store(agent, [ALLERGY, "Bob Martin from Globex also avoids shellfish and sesame."])

    snapshot = _snapshot(agent, input=LUNCH)

    with tenancy.agency_context(agent.agency_id):
        counts = dict(Memory.objects.values_list("content", "access_count"))
    given = snapshot["memories"][0].removeprefix("[fact] ")
    assert counts[given] == 1
    assert sum(counts.values()) == 1


@pytest.mark.django_db
def test_an_expired_memory_is_not_recalled() -> None:
    agent = AgentFactory.create()
    _store(agent, [ALLERGY])
    with tenancy.agency_context(agent.agency_id):
        Memory.objects.filter(agent=agent).update(
            expires_at=timezone.now() - datetime.timedelta(minutes=1)
        )

    snapshot = _snapshot(agent, input=LUNCH)

    assert snapshot["memories"] == []
    assert ALLERGY not in snapshot["system_prompt"]


@pytest.mark.django_db
def test_a_similar_past_run_is_recalled_with_its_outcome_and_lessons() -> None:
    agent = AgentFactory.create()
    with tenancy.agency_context(agent.agency_id):
        similar = EpisodeFactory.create(
            agent=agent,
            trigger_event="manual",
            context_summary="Order lunch for the Globex visit.",
            outcome_details="Ordered sandwiches; one guest could not eat them.",
            lessons_learned=["Ask about allergies before ordering food."],
        )
        unrelated = EpisodeFactory.create(
            agent=agent, context_summary="Reset the office wifi router password."
        )
        for episode in (similar, unrelated):
            embedded = embeddings.embed(
                [f"{episode.trigger_event}: {episode.context_summary}"], agency_id=agent.agency_id
            )
            episode.embedding, episode.embedding_model = embedded.vectors[0], embedded.model
            episode.save()

    snapshot = _snapshot(agent, input=LUNCH)

    assert len(snapshot["episodes"]) == 1
    assert "Order lunch for the Globex visit." in snapshot["episodes"][0]
    assert "Ask about allergies before ordering food." in snapshot["episodes"][0]
    assert "## Similar Past Situations" in snapshot["system_prompt"]
    assert "wifi" not in snapshot["system_prompt"]


@pytest.mark.django_db
def test_an_agent_with_nothing_to_remember_makes_no_embedding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    agent = AgentFactory.create()

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("no embedding expected")

    monkeypatch.setattr(embeddings, "embed", refuse)

    snapshot = _snapshot(agent, input=LUNCH)

    assert snapshot["memories"] == []
    assert snapshot["episodes"] == []


def test_a_run_of_the_same_session_continues_its_conversation(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer
) -> None:
    agent = make_agent(conversation_window=4)
    session = str(uuid.uuid4())
    answers = iter(["Hello Ada.", "You asked me to greet you."])
    fake_llm_server.set_responder(lambda request: text_reply(next(answers)), key=agent.llm_model)

    for text in ("Greet Ada.", "What did I ask you before?"):
        execution = run_to_end(agent, text, trigger_data={"session_id": session})
        assert execution.status == ExecutionStatus.COMPLETED, execution.error
        complete_episode(execution)

    first, second = fake_llm_server.requests_for(agent.llm_model)
    assert [m["role"] for m in first.messages] == ["system", "user"]
    assert [(m["role"], m["content"]) for m in second.messages[1:]] == [
        ("user", "Greet Ada."),
        ("assistant", "Hello Ada."),
        ("user", "What did I ask you before?"),
    ]


def test_another_session_starts_afresh(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer
) -> None:
    agent = make_agent()
    fake_llm_server.set_responder(lambda request: text_reply("Hi."), key=agent.llm_model)
    for _ in range(2):
        execution = run_to_end(agent, "Greet Ada.", trigger_data={"session_id": str(uuid.uuid4())})
        complete_episode(execution)

    assert [len(r.messages) for r in fake_llm_server.requests_for(agent.llm_model)] == [2, 2]
