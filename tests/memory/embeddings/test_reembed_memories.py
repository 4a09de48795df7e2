"""``manage.py reembed_memories``: an agency's memories and episodes embedded again with its
current model, in committed batches, resumable, one agency or all."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from core import tenancy
from core.models import Agency
from memory import embeddings
from memory.embeddings import backfill
from memory.embeddings.local import MiniLM
from memory.models import Episode, Memory
from tests.agents.factories import AgentFactory
from tests.memory.factories import EpisodeFactory, MemoryFactory

pytestmark = pytest.mark.django_db

LOCAL = "local:all-MiniLM-L6-v2"
OLD = "openai:text-embedding-3-small@384"
OLD_VECTOR = [0.0] * 383 + [1.0]


def _agent_with_old_memories(count: int) -> Any:
    """An agent whose memories were embedded by OpenAI; its agency is now on the local model."""
    agent = AgentFactory.create()
    for i in range(count):
        MemoryFactory.create(
            agent=agent,
            content=f"Fact {i} about the customer",
            embedding=OLD_VECTOR,
            embedding_model=OLD,
        )
    return agent


def _models(agency_id: Any) -> list[str]:
    with tenancy.platform_context():
        return sorted(
            Memory.objects.filter(agency_id=agency_id).values_list("embedding_model", flat=True)
        )


def _run(*args: str) -> str:
    out = StringIO()
    call_command("reembed_memories", *args, stdout=out)
    return out.getvalue()


def test_an_agencys_memories_of_another_model_are_embedded_with_the_current_one(
    local_model: MiniLM,
) -> None:
    agent = _agent_with_old_memories(3)
    MemoryFactory.create(agent=agent, content="Never embedded")  # NULL: embedded too
    episode = EpisodeFactory.create(agent=agent, context_summary="A run about invoices")
    other = _agent_with_old_memories(1)

    output = _run("--agency", agent.agency.slug)

    assert _models(agent.agency_id) == [LOCAL] * 4
    assert _models(other.agency_id) == [OLD]  # another agency is left alone
    with tenancy.platform_context():
        memory = Memory.objects.get(agent=agent, content="Fact 0 about the customer")
        assert Episode.objects.get(pk=episode.pk).embedding_model == LOCAL
    expected = embeddings.embed(["Fact 0 about the customer"], agency_id=None).vectors[0]
    assert memory.embedding is not None
    assert list(memory.embedding) == pytest.approx(expected, abs=1e-6)
    assert f"{agent.agency.name}: {LOCAL}: 4 memories, 1 episodes" in output
    assert "Done: 5 embedded again." in output


def test_running_it_again_has_nothing_to_do(local_model: MiniLM) -> None:
    agent = _agent_with_old_memories(2)
    _run("--agency", str(agent.agency_id))

    output = _run("--agency", str(agent.agency_id))

    assert "0 memories, 0 episodes" in output
    assert "Done: 0 embedded again." in output


def test_an_interrupted_run_continues_where_it_stopped(
    local_model: MiniLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = _agent_with_old_memories(5)
    real = backfill.embed_with
    calls = 0

    def fails_on_the_second_batch(config: embeddings.EmbeddingConfig, texts: list[str]) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise embeddings.EmbeddingError("no answer", retryable=True)
        return real(config, texts)

    monkeypatch.setattr(backfill, "embed_with", fails_on_the_second_batch)
    with pytest.raises(CommandError, match="2 embedded again; run the command again"):
        _run("--agency", agent.agency.slug, "--batch-size", "2")
    assert _models(agent.agency_id).count(LOCAL) == 2  # the first batch stays done

    monkeypatch.setattr(backfill, "embed_with", real)
    output = _run("--agency", agent.agency.slug, "--batch-size", "2")

    assert "3 memories" in output
    assert _models(agent.agency_id) == [LOCAL] * 5


def test_after_a_change_of_model_the_memories_follow_it(
    local_model: MiniLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = AgentFactory.create()
    MemoryFactory.create(
        agent=agent, content="Prefers e-mail", embedding=OLD_VECTOR, embedding_model=LOCAL
    )
    with tenancy.platform_context():
        Agency.objects.filter(pk=agent.agency_id).update(
            embedding_provider="openai_compatible", embedding_model="fake-embed-384"
        )
    seen: list[str] = []

    def fake_server(config: embeddings.EmbeddingConfig, texts: list[str]) -> Any:
        seen.append(config.name)
        return embeddings.Embedded(model=config.name, vectors=[OLD_VECTOR for _ in texts])

    monkeypatch.setattr(backfill, "embed_with", fake_server)
    _run("--agency", agent.agency.slug)

    assert seen == ["openai_compatible:fake-embed-384@384"]
    assert _models(agent.agency_id) == ["openai_compatible:fake-embed-384@384"]


def test_all_agencies_at_once(local_model: MiniLM) -> None:
    first = _agent_with_old_memories(1)
    second = _agent_with_old_memories(2)

    _run("--all")

    assert _models(first.agency_id) == [LOCAL]
    assert _models(second.agency_id) == [LOCAL] * 2


def test_an_unknown_agency_or_no_choice_is_refused() -> None:
    with pytest.raises(CommandError, match="No agency with id or slug 'nope'"):
        _run("--agency", "nope")
    with pytest.raises(CommandError, match="one of the arguments --agency --all is required"):
        _run()
