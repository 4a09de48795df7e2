"""``memory.embed_pending``: what was stored without a vector is embedded off the request path,
a bounded batch per task, in the agency's context, the task sending itself while more wait."""

from __future__ import annotations

from typing import Any

import pytest

from core import tenancy
from memory import embeddings, tasks
from memory.embeddings import backfill
from memory.embeddings.local import MiniLM
from memory.models import Episode, Memory
from tests.agents.factories import AgentFactory
from tests.memory.factories import EpisodeFactory, MemoryFactory

pytestmark = pytest.mark.django_db

LOCAL = "local:all-MiniLM-L6-v2"


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The task's messages to itself (no broker in a unit test)."""
    messages: list[dict[str, Any]] = []
    monkeypatch.setattr(tasks.embed_pending, "apply_async", lambda **kw: messages.append(kw))
    return messages


def _rows(model: type[Memory] | type[Episode], **where: Any) -> list[Any]:
    with tenancy.platform_context():
        return list(model.objects.filter(**where).order_by("created_at"))


def test_waiting_memories_are_embedded_a_batch_per_task_until_none_is_left(
    local_model: MiniLM, sent: list[dict[str, Any]], settings: Any
) -> None:
    settings.AGENTDESK_EMBEDDING_BATCH_SIZE = 2
    agent = AgentFactory.create()
    contents = ["Prefers e-mail to phone calls.", "Renews in March.", "Closed on Fridays."]
    for content in contents:
        MemoryFactory.create(agent=agent, content=content)
    agency_id = str(agent.agency_id)

    assert tasks.embed_pending(agency_id=agency_id) == 2
    assert sent == [{"kwargs": {"agency_id": agency_id}}]
    assert tasks.embed_pending(agency_id=agency_id) == 1
    assert len(sent) == 1  # nothing left: no further message

    memories = _rows(Memory, agent=agent)
    expected = embeddings.embed(contents, agency_id=agent.agency_id).vectors
    by_content = {m.content: m for m in memories}
    for content, vector in zip(contents, expected, strict=True):
        memory = by_content[content]
        assert memory.embedding_model == LOCAL
        assert list(memory.embedding) == pytest.approx(vector, abs=1e-6)


def test_only_the_agencys_rows_without_a_vector_are_touched(
    local_model: MiniLM, sent: list[dict[str, Any]]
) -> None:
    agent = AgentFactory.create()
    waiting = MemoryFactory.create(agent=agent, content="Allergic to peanuts.")
    old_vector = [1.0] + [0.0] * 383
    embedded = MemoryFactory.create(
        agent=agent, content="Speaks Spanish.", embedding=old_vector, embedding_model="other"
    )
    elsewhere = MemoryFactory.create(content="Another agency's fact.")

    assert tasks.embed_pending(agency_id=str(agent.agency_id)) == 1

    (waiting_now,) = _rows(Memory, pk=waiting.pk)
    (embedded_now,) = _rows(Memory, pk=embedded.pk)
    (elsewhere_now,) = _rows(Memory, pk=elsewhere.pk)
    assert waiting_now.embedding_model == LOCAL
    assert embedded_now.embedding_model == "other"  # reembed_memories' job, not this task's
    assert list(embedded_now.embedding) == old_vector
    assert elsewhere_now.embedding is None
    assert sent == []


def test_episodes_without_a_vector_are_embedded_too(
    local_model: MiniLM, sent: list[dict[str, Any]]
) -> None:
    episode = EpisodeFactory.create(
        trigger_event="manual", context_summary="Follow up on the unpaid September invoice."
    )

    assert tasks.embed_pending(agency_id=str(episode.agency_id)) == 1

    (row,) = _rows(Episode, pk=episode.pk)
    assert row.embedding_model == LOCAL
    assert len(row.embedding) == 384


def test_a_memory_edited_while_it_was_embedded_keeps_waiting_for_its_new_text(
    local_model: MiniLM, sent: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = MemoryFactory.create(content="Budget is 20,000 dollars.")
    real = backfill.embed_with

    def edited_meanwhile(config: embeddings.EmbeddingConfig, texts: list[str]) -> Any:
        result = real(config, texts)
        with tenancy.platform_context():
            Memory.objects.filter(pk=memory.pk).update(content="Budget is 25,000 dollars.")
        return result

    monkeypatch.setattr(backfill, "embed_with", edited_meanwhile)
    assert tasks.embed_pending(agency_id=str(memory.agency_id)) == 0
    monkeypatch.setattr(backfill, "embed_with", real)
    assert tasks.embed_pending(agency_id=str(memory.agency_id)) == 1

    (row,) = _rows(Memory, pk=memory.pk)
    expected = embeddings.embed(["Budget is 25,000 dollars."], agency_id=None).vectors[0]
    assert list(row.embedding) == pytest.approx(expected, abs=1e-6)


def test_a_provider_outage_retries_the_task_later(
    sent: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = MemoryFactory.create()

    def down(config: embeddings.EmbeddingConfig, texts: list[str]) -> Any:
        raise embeddings.EmbeddingError("no answer", code="embedding_unavailable", retryable=True)

    retried: list[dict[str, Any]] = []

    def retry(**kwargs: Any) -> Exception:
        retried.append(kwargs)
        return RuntimeError("retry")

    monkeypatch.setattr(backfill, "embed_with", down)
    monkeypatch.setattr(tasks.embed_pending, "retry", retry)
    with pytest.raises(RuntimeError, match="retry"):
        tasks.embed_pending(agency_id=str(memory.agency_id))

    assert retried[0]["countdown"] == tasks.RETRY_SECONDS
    (row,) = _rows(Memory, pk=memory.pk)
    assert row.embedding is None


def test_a_sweep_sends_one_task_per_agency_with_rows_waiting(sent: list[dict[str, Any]]) -> None:
    memory = MemoryFactory.create()
    episode = EpisodeFactory.create()
    done = MemoryFactory.create(embedding=[1.0] + [0.0] * 383, embedding_model=LOCAL)

    tasks.embed_pending()

    agencies = {message["kwargs"]["agency_id"] for message in sent}
    assert {str(memory.agency_id), str(episode.agency_id)} <= agencies
    assert str(done.agency_id) not in agencies
