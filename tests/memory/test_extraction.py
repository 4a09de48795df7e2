"""Extraction after a run (memory/extraction.py, memory/episodes.py): the model's JSON validated
item by item against the schema; memories stored through memory_store with deduplication (a
near-identical memory raises the existing one's confidence instead of a copy); the call counted
in usage and budget like any model call; the per-agent switch."""

from __future__ import annotations

import datetime
import json
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from agents.models import Agent, Execution
from core import tenancy
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import RecordedRequest, Step, text_reply
from memory.extraction import EXTRACTION_PROMPT, parse_extraction
from memory.models import Memory, MemoryChange, MemoryChangeAction
from tests.memory.runs import complete_episode, run_to_end
from usage.models import Budget, ModelPrice, UsageDaily, UsagePurpose

EXTRACTOR = EXTRACTION_PROMPT.split(".")[0]
ALICE = "Alice Moreau prefers to be contacted by e-mail, never by phone."
ALICE_AGAIN = "Alice Moreau prefers being contacted by e-mail and never by phone."


# --- the schema ---------------------------------------------------------------------------------


def test_a_valid_answer_becomes_memories_lessons_and_a_verdict() -> None:
    now = timezone.now()
    subject = uuid.uuid4()
    answer = json.dumps(
        {
            "memories": [
                {
                    "type": "preference",
                    "content": ALICE,
                    "subject_type": "contact",
                    "subject_id": str(subject),
                    "confidence": 0.9,
                    "importance": 8,
                    "tags": ["contact", "channel", "contact"],
                    "expires_in_days": 30,
                }
            ],
            "lessons": ["Check the contact's channel first."],
            "should_repeat": True,
        }
    )

    found = parse_extraction(f"Here you are:\n```json\n{answer}\n```", now=now)

    assert found is not None
    (memory,) = found.memories
    assert memory.memory_type == "preference"
    assert memory.subject_id == subject
    assert memory.confidence == Decimal("0.9")
    assert memory.tags == ("contact", "channel")
    assert memory.expires_at == now + datetime.timedelta(days=30)
    assert found.lessons == ["Check the contact's channel first."]
    assert found.should_repeat is True


def test_invalid_memories_are_dropped_and_the_valid_ones_kept() -> None:
    answer = {
        "memories": [
            {"type": "rumour", "content": "Not a memory type."},
            {"type": "fact", "content": "Importance out of range.", "importance": 11},
            {"type": "fact", "content": "A subject id that is no id.", "subject_id": "contact-7"},
            {"type": "fact"},
            "not an object",
            {"type": "outcome", "content": "The quote was accepted within a day."},
        ]
    }

    found = parse_extraction(json.dumps(answer))

    assert found is not None
    assert [m.content for m in found.memories] == ["The quote was accepted within a day."]
    assert found.rejected == 5


def test_a_bare_array_is_the_list_of_memories_and_prose_is_no_extraction() -> None:
    found = parse_extraction(json.dumps([{"type": "fact", "content": "Acme renews in March."}]))
    assert found is not None
    assert [m.content for m in found.memories] == ["Acme renews in March."]
    assert parse_extraction("Nothing worth remembering, sorry.") is None


# --- after a run --------------------------------------------------------------------------------


def extractor(*answers: dict[str, Any]) -> Callable[[RecordedRequest], Step]:
    """The run's model: answers each run with "Done.", each extraction with the next answer."""
    queue = list(answers)

    def respond(request: RecordedRequest) -> Step:
        if (request.system or "").startswith(EXTRACTOR):
            return text_reply(json.dumps(queue.pop(0)), input_tokens=400, output_tokens=100)
        return text_reply("Done.")

    return respond


def preference(content: str, **fields: Any) -> dict[str, Any]:
    return {"type": "preference", "content": content, "confidence": 0.7, **fields}


def memories_of(agent: Agent) -> list[Memory]:
    with tenancy.agency_context(agent.agency_id):
        return list(Memory.objects.filter(agent=agent).order_by("created_at"))


def test_extraction_stores_memories_and_dedups_a_near_identical_one(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer
) -> None:
    agent = make_agent(memory_extraction_enabled=True)
    fake_llm_server.set_responder(
        extractor(
            {"memories": [preference(ALICE, importance=6)], "lessons": ["E-mail Alice."]},
            {"memories": [preference(ALICE_AGAIN, importance=7)], "should_repeat": True},
        ),
        key=agent.llm_model,
    )

    first = run_to_end(agent, "Call Alice about the renewal.")
    episode = complete_episode(first)
    (stored,) = memories_of(agent)
    second = run_to_end(agent, "Write to Alice about the renewal.")
    complete_episode(second)

    (memory,) = memories_of(agent)  # no copy
    assert memory.id == stored.id
    assert memory.content == ALICE
    assert memory.confidence == Decimal("0.75")  # raised by the duplicate
    assert memory.importance == 7
    assert memory.access_count == 2  # recalled by the second run, then reinforced
    assert memory.execution_id == first.id
    assert memory.source == "extraction"
    assert episode.lessons_learned == ["E-mail Alice."]
    assert episode.embedding_model
    with tenancy.agency_context(agent.agency_id):
        (change,) = MemoryChange.objects.filter(agent=agent)
        second = Execution.objects.get(pk=second.pk)
    assert change.action == MemoryChangeAction.DEDUP
    assert change.execution_id == second.id
    assert second.result["memory_extraction"]["reinforced"] == 1
    assert second.result["memory_extraction"]["stored"] == 0


def test_extraction_is_counted_in_usage_and_the_budget(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer
) -> None:
    agent = make_agent(memory_extraction_enabled=True)
    fake_llm_server.set_responder(extractor({"memories": []}), key=agent.llm_model)
    with tenancy.agency_context(agent.agency_id):
        ModelPrice.objects.create(
            agency_id=agent.agency_id, provider="openai", model=agent.llm_model,
            input_per_mtok=Decimal(10), output_per_mtok=Decimal(20),
        )  # fmt: skip
        budget = Budget.objects.create(
            agency_id=agent.agency_id, date=timezone.localdate(), limit_usd=Decimal(1)
        )

    execution = run_to_end(agent, "Call Alice.")
    complete_episode(execution)

    extraction_cost = Decimal("0.006")  # 400 tokens in at $10/M, 100 out at $20/M
    with tenancy.agency_context(agent.agency_id):
        rows = {row.purpose: row for row in UsageDaily.objects.filter(agent_id=agent.id)}
        budget.refresh_from_db()
        execution = Execution.objects.get(pk=execution.pk)
    # On a row of its own, beside the run's (whose cost is the run's own, as its page says).
    run_row, usage = rows.pop(UsagePurpose.RUN), rows.pop(UsagePurpose.MEMORY_EXTRACTION)
    assert rows == {}
    assert (run_row.llm_calls, run_row.cost_usd) == (execution.llm_call_count, execution.cost_usd)
    assert run_row.llm_calls + usage.llm_calls == execution.llm_call_count + 1
    assert run_row.tokens_input + usage.tokens_input == execution.tokens_input + 400
    assert run_row.cost_usd + usage.cost_usd == execution.cost_usd + extraction_cost
    assert budget.used_usd == execution.cost_usd + extraction_cost
    assert budget.reserved_usd == 0
    assert Decimal(execution.result["memory_extraction"]["cost_usd"]) == extraction_cost


def test_no_extraction_when_the_budget_is_spent(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer
) -> None:
    # The run's step fits in the budget (max_tokens 10); the extraction's 1,500 do not.
    agent = make_agent(memory_extraction_enabled=True, max_tokens=10)
    fake_llm_server.set_responder(extractor({"memories": []}), key=agent.llm_model)
    with tenancy.agency_context(agent.agency_id):
        ModelPrice.objects.create(
            agency_id=agent.agency_id, provider="openai", model=agent.llm_model,
            input_per_mtok=Decimal(10), output_per_mtok=Decimal(20),
        )  # fmt: skip
        Budget.objects.create(
            agency_id=agent.agency_id, date=timezone.localdate(), limit_usd=Decimal("0.003")
        )
    execution = run_to_end(agent, "Call Alice.")
    assert execution.status == "completed", execution.error

    episode = complete_episode(execution)

    assert len(fake_llm_server.requests_for(agent.llm_model)) == 1  # the run's only
    with tenancy.agency_context(agent.agency_id):
        execution = Execution.objects.get(pk=execution.pk)
    assert execution.result["memory_extraction"]["skipped"] == "budget_exceeded"
    assert episode.embedding_model  # still embedded


def test_no_extraction_when_the_agent_switched_it_off(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer
) -> None:
    agent = make_agent(memory_extraction_enabled=False)
    fake_llm_server.set_responder(extractor(), key=agent.llm_model)

    execution = run_to_end(agent, "Call Alice.")
    episode = complete_episode(execution)

    assert len(fake_llm_server.requests_for(agent.llm_model)) == 1
    assert memories_of(agent) == []
    assert episode.embedding_model
    with tenancy.agency_context(agent.agency_id):
        execution = Execution.objects.get(pk=execution.pk)
    assert "memory_extraction" not in execution.result
    assert "memory_after_run" in execution.result


@pytest.mark.parametrize("answer", ["I learned nothing.", '{"memories": "none"}'])
def test_an_answer_without_memories_stores_none(
    answer: str, make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer
) -> None:
    agent = make_agent(memory_extraction_enabled=True)

    def respond(request: RecordedRequest) -> Step:
        return text_reply(answer if (request.system or "").startswith(EXTRACTOR) else "Done.")

    fake_llm_server.set_responder(respond, key=agent.llm_model)
    execution = run_to_end(agent, "Call Alice.")
    complete_episode(execution)

    assert memories_of(agent) == []
