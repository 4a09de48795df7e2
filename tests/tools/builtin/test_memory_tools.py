"""remember stores a memory of the calling agent (reinforcing a near-identical one); recall
searches the agent's memories by meaning. The real local embedding model."""

from __future__ import annotations

import pytest

from agents.models import Agent
from core import tenancy
from memory import embeddings
from memory.models import Memory
from tests.memory.factories import MemoryFactory
from tests.tools.builtin.conftest import call, call_error
from tools.handlers import ToolContext


def memories(ctx: ToolContext) -> list[Memory]:
    with tenancy.agency_context(ctx.agency_id):
        return list(Memory.objects.filter(agent_id=ctx.agent_id).order_by("created_at"))


def test_remember_stores_an_embedded_memory_of_the_agent(ctx: ToolContext) -> None:
    output = call(
        ctx,
        "remember",
        {
            "content": "Alice Moreau prefers to be contacted by e-mail.",
            "memory_type": "preference",
            "subject_type": "contact",
            "subject_id": "7f1c3a52-52c1-4c57-9c1b-1d7f0d6c1a11",
            "importance": 7,
            "confidence": 0.9,
            "tags": ["contact"],
            "expires_in_days": 30,
        },
    )

    (memory,) = memories(ctx)
    assert output == {
        "memory_id": str(memory.id),
        "status": "stored",
        "memory_type": "preference",
        "confidence": 0.9,
        "importance": 7,
    }
    assert memory.execution_id == ctx.execution_id
    assert memory.source == "tool:remember"
    assert memory.embedding_model == embeddings.model_for(ctx.agency_id)
    assert memory.expires_at is not None


def test_remembering_it_again_reinforces_it(ctx: ToolContext) -> None:
    first = call(ctx, "remember", {"content": "Acme renews in March.", "memory_type": "fact"})
    again = call(ctx, "remember", {"content": "Acme renews in March!", "memory_type": "fact"})

    assert again["status"] == "reinforced"
    assert again["memory_id"] == first["memory_id"]
    assert again["confidence"] > first["confidence"]
    assert len(memories(ctx)) == 1


@pytest.mark.parametrize(
    "args",
    [
        {"content": "", "memory_type": "fact"},
        {"content": "x" * 2001, "memory_type": "fact"},
        {"content": "ok", "memory_type": "dream"},
        {"content": "ok", "memory_type": "fact", "importance": 0},
        {"content": "ok", "memory_type": "fact", "importance": 5.5},
        {"content": "ok", "memory_type": "fact", "confidence": 3},
        {"content": "ok", "memory_type": "fact", "subject_id": "nope"},
        {"content": "ok", "memory_type": "fact", "tags": "one"},
        {"content": "ok", "memory_type": "fact", "expires_in_days": 0},
        {"content": "a\x00b", "memory_type": "fact"},
    ],
)
def test_remember_refuses_bad_arguments(ctx: ToolContext, args: dict[str, object]) -> None:
    error = call_error(ctx, "remember", args, validate=False)

    assert error.code == "invalid_argument"
    assert memories(ctx) == []


def test_recall_finds_the_agents_memory_by_meaning_and_counts_the_access(
    ctx: ToolContext, other_ctx: ToolContext
) -> None:
    for content in [
        "Bob Martin from Globex is allergic to peanuts.",
        "Acme Corp renews its support contract every March.",
        "Quotes sent on Fridays are opened less often.",
    ]:
        call(ctx, "remember", {"content": content, "memory_type": "fact"})
    call(other_ctx, "remember", {"content": "Bob cannot eat peanuts.", "memory_type": "fact"})

    output = call(ctx, "recall", {"query": "Which food can't Bob eat?", "k": 2})

    assert output["count"] == 2
    best = output["memories"][0]
    assert best["content"] == "Bob Martin from Globex is allergic to peanuts."
    assert best["similarity"] > 0.3
    assert "Bob cannot eat peanuts." not in [m["content"] for m in output["memories"]]
    touched = {str(m.id): m.access_count for m in memories(ctx)}
    assert touched[best["id"]] == 1


def test_recall_filters_by_type_and_subject(ctx: ToolContext) -> None:
    call(ctx, "remember", {"content": "Prefers calls in the morning.", "memory_type": "preference"})
    call(ctx, "remember", {"content": "Morning calls convert best.", "memory_type": "pattern"})
    with tenancy.platform_context():
        agent = Agent.objects.select_related("agency", "site").get(pk=ctx.agent_id)
    MemoryFactory.create(
        agent=agent,
        content="Calls about the Lyon deal.",
        subject_type="deal",
        subject_id="00000000-0000-0000-0000-00000000d001",
    )

    patterns = call(ctx, "recall", {"query": "calls", "memory_types": ["pattern"]})
    deal = call(
        ctx,
        "recall",
        {
            "query": "calls",
            "subject_type": "deal",
            "subject_id": "00000000-0000-0000-0000-00000000d001",
        },
    )

    assert [m["content"] for m in patterns["memories"]] == ["Morning calls convert best."]
    assert [m["content"] for m in deal["memories"]] == ["Calls about the Lyon deal."]


@pytest.mark.parametrize(
    "args",
    [
        {"query": ""},
        {"query": "x" * 1001},
        {"query": "ok", "k": 0},
        {"query": "ok", "memory_types": ["dream"]},
        {"query": "ok", "memory_types": "fact"},
        {"query": "ok", "subject_id": "nope"},
    ],
)
def test_recall_refuses_bad_arguments(ctx: ToolContext, args: dict[str, object]) -> None:
    assert call_error(ctx, "recall", args, validate=False).code == "invalid_argument"
