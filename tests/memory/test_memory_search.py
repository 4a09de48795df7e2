"""Long-term memory: pgvector embeddings, cosine nearest neighbours, tenant isolation."""

from __future__ import annotations

import datetime
import math

import pytest
from django.db import connection
from django.utils import timezone
from pgvector.django import CosineDistance

from core import tenancy
from memory.models import EMBEDDING_DIMENSIONS, Memory, MemoryType
from memory.selectors import memory_search
from tests.agents.factories import AgentFactory
from tests.memory.factories import MemoryFactory

pytestmark = pytest.mark.django_db


def vector(*head: float) -> list[float]:
    """A 1536-dimension vector that starts with ``head`` and is 0 after it."""
    return [*head, *([0.0] * (EMBEDDING_DIMENSIONS - len(head)))]


def test_embedding_is_stored_and_read_back() -> None:
    memory = MemoryFactory.create(embedding=vector(0.25, -0.5, 1.0))
    with tenancy.agency_context(memory.agency_id):
        stored = Memory.objects.get(pk=memory.pk).embedding
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT vector_dims(embedding) FROM memory_memory WHERE id = %s", [memory.pk]
            )
            assert cursor.fetchone() == (EMBEDDING_DIMENSIONS,)
    assert stored is not None
    assert len(stored) == EMBEDDING_DIMENSIONS
    assert list(stored[:4]) == pytest.approx([0.25, -0.5, 1.0, 0.0])


def test_memory_search_orders_by_cosine_distance() -> None:
    agent = AgentFactory.create()
    near = MemoryFactory.create(agent=agent, content="near", embedding=vector(1.0, 0.1))
    middle = MemoryFactory.create(agent=agent, content="middle", embedding=vector(1.0, 1.0))
    far = MemoryFactory.create(agent=agent, content="far", embedding=vector(-1.0, 0.2))
    # Cosine ignores length: a long vector in the same direction is as near as a short one.
    MemoryFactory.create(agent=agent, content="no embedding", embedding=None)
    with tenancy.agency_context(agent.agency_id):
        results = list(memory_search(agent=agent, embedding=vector(10.0, 0.0), limit=10))
    assert [m.content for m in results] == ["near", "middle", "far"]
    assert results[0].pk == near.pk
    assert results[1].pk == middle.pk
    assert results[2].pk == far.pk
    # Annotations of memory_search: similarity = 1 - cosine distance.
    first, second = results[0].__dict__, results[1].__dict__
    assert first["similarity"] == pytest.approx(1 - first["distance"])
    assert second["similarity"] == pytest.approx(math.cos(math.pi / 4))


def test_memory_search_filters_types_expiry_and_limit() -> None:
    agent = AgentFactory.create()
    MemoryFactory.create(agent=agent, content="fact", embedding=vector(1.0))
    MemoryFactory.create(
        agent=agent, content="pref", memory_type=MemoryType.PREFERENCE, embedding=vector(1.0, 0.5)
    )
    MemoryFactory.create(
        agent=agent,
        content="expired",
        embedding=vector(1.0),
        expires_at=timezone.now() - datetime.timedelta(minutes=1),
    )
    with tenancy.agency_context(agent.agency_id):
        assert [m.content for m in memory_search(agent=agent, embedding=vector(1.0))] == [
            "fact",
            "pref",
        ]
        only_prefs = memory_search(
            agent=agent, embedding=vector(1.0), memory_types=[MemoryType.PREFERENCE]
        )
        assert [m.content for m in only_prefs] == ["pref"]
        assert len(memory_search(agent=agent, embedding=vector(1.0), limit=1)) == 1


def test_nearest_neighbours_never_include_another_agencys_memories() -> None:
    mine = AgentFactory.create()
    theirs = AgentFactory.create()
    MemoryFactory.create(agent=mine, content="mine", embedding=vector(0.0, 1.0))
    # The other agency's memory is the exact match of the query.
    MemoryFactory.create(agent=theirs, content="theirs", embedding=vector(1.0, 0.0))
    query = vector(1.0, 0.0)
    with tenancy.agency_context(mine.agency_id):
        unfiltered = Memory.objects.order_by(CosineDistance("embedding", query))
        assert [m.content for m in unfiltered] == ["mine"]
        assert list(memory_search(agent=theirs, embedding=query)) == []
        assert [m.content for m in memory_search(agent=mine, embedding=query)] == ["mine"]
    with tenancy.agency_context(theirs.agency_id):
        assert [m.content for m in memory_search(agent=theirs, embedding=query)] == ["theirs"]


def test_memory_indexes_hnsw_cosine_and_btree_on_agency_and_agent() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'memory_memory'"
        )
        indexes = dict(cursor.fetchall())
    assert "USING hnsw (embedding vector_cosine_ops)" in indexes["memory_memory_embedding_hnsw"]
    assert "USING btree (agency_id, agent_id)" in indexes["memory_memory_agent_idx"]
    assert not any("ivfflat" in definition for definition in indexes.values())
