"""Reads of agent memory."""

from __future__ import annotations

from collections.abc import Sequence

from django.db.models import F, FloatField, Q, QuerySet
from django.db.models.expressions import ExpressionWrapper, Value
from django.utils import timezone
from pgvector.django import CosineDistance

from agents.models import Agent
from memory.models import Memory


def memory_search(
    *,
    agent: Agent,
    embedding: Sequence[float],
    limit: int = 10,
    memory_types: Sequence[str] | None = None,
    min_similarity: float | None = None,
) -> QuerySet[Memory]:
    """The agent's unexpired memories nearest to ``embedding`` by cosine distance, nearest first.

    Seed 004's ``search_agent_memories``: each row is annotated with ``distance`` and
    ``similarity`` (1 - distance). Runs under the caller's tenant context: row-level security
    keeps other agencies' memories out even if ``agent`` belonged to one.
    """
    distance = CosineDistance("embedding", list(embedding))
    memories = (
        Memory.objects.filter(agent=agent, embedding__isnull=False)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now()))
        .annotate(distance=distance)
        .annotate(
            similarity=ExpressionWrapper(Value(1.0) - F("distance"), output_field=FloatField())
        )
    )
    if memory_types:
        memories = memories.filter(memory_type__in=list(memory_types))
    if min_similarity is not None:
        memories = memories.filter(similarity__gte=min_similarity)
    return memories.order_by("distance")[:limit]
