"""Similar past situations: an agent's episodes nearest to a text by meaning."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import FloatField
from django.db.models.expressions import RawSQL
from django.utils import timezone

from agents.models import Agent
from memory.models import Episode
from memory.search.memories import MAX_K, QUERY_MAX_CHARS, embed_query, recency
from memory.search.nearest import nearest, steered_planner, vector_literal


@dataclass(frozen=True)
class EpisodeHit:
    episode: Episode
    score: float
    similarity: float


def search_episodes(*, agent: Agent, query: str, k: int = 3) -> list[EpisodeHit]:
    """The agent's ``k`` past episodes most similar to ``query`` ("similar past situations"),
    by cosine similarity of their embeddings (the agency's current model only), with a little
    recency to order near-equals. Empty when the embedding provider fails (logged).

    Precondition: the agent's tenant context.
    """
    k = max(1, min(int(k), MAX_K))
    model, vector = embed_query(query[:QUERY_MAX_CHARS], agency_id=agent.agency_id)
    if vector is None:
        return []
    sql = "agency_id = %s AND agent_id = %s AND embedding_model = %s AND embedding IS NOT NULL"
    params: list[Any] = [agent.agency_id, agent.id, model]
    size_key = (Episode._meta.db_table, model, agent.id)
    with steered_planner():
        found = nearest(Episode._meta.db_table, sql, params, vector, k, size_key=size_key)
    if not found:
        return []
    similarity_sql = RawSQL(
        "1 - (embedding <=> %s::vector)", [vector_literal(vector)], output_field=FloatField()
    )
    episodes = (
        Episode.objects.filter(agency_id=agent.agency_id, id__in=found)
        .defer("embedding")
        .annotate(similarity=similarity_sql)
    )
    now = timezone.now()
    hits = []
    for episode in episodes:
        similarity = float(episode.similarity)
        score = 0.9 * max(similarity, 0.0) + 0.1 * recency(episode.created_at, now)
        hits.append(EpisodeHit(episode=episode, score=score, similarity=similarity))
    hits.sort(key=lambda hit: (-hit.score, -hit.similarity))
    return hits[:k]
