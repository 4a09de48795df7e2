"""Hybrid search of an agent's memories: candidates by meaning (:mod:`memory.search.nearest`) and
by words, re-ranked with one blend. See :mod:`memory.search`."""

from __future__ import annotations

import logging
import math
import re
import uuid
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import F, FloatField
from django.db.models.expressions import RawSQL
from django.utils import timezone

from agents.models import Agent
from memory import embeddings
from memory.models import TEXT_SEARCH_CONFIG, Memory
from memory.search.nearest import nearest, steered_planner, vector_literal

logger = logging.getLogger(__name__)

MAX_K = 100
QUERY_MAX_CHARS = 2000
QUERY_MAX_WORDS = 32  # of the full-text query; the embedding reads the whole text

# The blend. Similarity leads; the words matter where embeddings are weak (names, codes, ids);
# importance, recency and confidence order memories that are about equally relevant.
SIMILARITY_WEIGHT = 0.60
TEXT_WEIGHT = 0.15
IMPORTANCE_WEIGHT = 0.10
RECENCY_WEIGHT = 0.10
CONFIDENCE_WEIGHT = 0.05
RECENCY_HALF_LIFE_DAYS = 30.0
# The similarity a memory that cannot be compared by meaning is given per share of the query's
# words it contains: all of them count about as much as a close paraphrase.
UNEMBEDDED_SIMILARITY = 0.6
# Candidates gathered per result wanted, by meaning and by words.
VECTOR_CANDIDATES_PER_RESULT = 4
TEXT_CANDIDATES_PER_RESULT = 2
MIN_CANDIDATES = 20
# Rows of a large agent the search by words reads (its most important and recent ones).
TEXT_SCAN_MAX_ROWS = 5_000

_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Hit:
    memory: Memory
    score: float  # the blend, 0..1
    similarity: float | None  # cosine similarity to the query; None: found by its words only


def search_memories(
    *,
    agent: Agent,
    query: str,
    k: int = 10,
    types: Sequence[str] = (),
    subject_type: str = "",
    subject_id: uuid.UUID | None = None,
    touch: bool = True,
    min_similarity: float | None = None,
) -> list[Hit]:
    """The agent's ``k`` unexpired memories most relevant to ``query``, best first.

    ``types`` / ``subject_*`` filter; ``touch`` counts the returned memories as accessed
    (``access_count``, ``last_accessed_at``: what pruning reads), which a person browsing in the
    admin or the API should not do. ``min_similarity`` drops hits less similar than that (hits
    found by their words alone are kept). If the embedding provider fails the search goes on
    with words, importance and recency, and logs it.

    Precondition: the agent's tenant context (row-level security), e.g. ``agency_context``.
    """
    k = max(1, min(int(k), MAX_K))
    query = query[:QUERY_MAX_CHARS]
    now = timezone.now()
    where = _MemoryFilter(
        agency_id=agent.agency_id,
        agent_id=agent.id,
        now=now,
        types=tuple(types),
        subject_type=subject_type,
        subject_id=subject_id,
    )
    model, vector = embed_query(query, agency_id=agent.agency_id)

    vector_wanted = max(MIN_CANDIDATES, VECTOR_CANDIDATES_PER_RESULT * k)
    candidate_ids: list[uuid.UUID] = []
    with steered_planner():
        if vector is not None:
            sql, params = where.sql(model=model)
            size_key = (Memory._meta.db_table, model, where.key())
            candidate_ids += nearest(
                Memory._meta.db_table, sql, params, vector, vector_wanted, size_key=size_key
            )
        words = _text_query(query)
        if words:
            wanted = max(MIN_CANDIDATES // 2, TEXT_CANDIDATES_PER_RESULT * k)
            candidate_ids += _text_matches(where, words, wanted)
        candidate_ids = list(dict.fromkeys(candidate_ids))
        if len(candidate_ids) < k:
            # Fewer candidates than asked for: only memories neither embedded by the current
            # model nor matching a word are left; the most important of them complete the k.
            candidate_ids += _most_important(
                where, exclude=candidate_ids, limit=k - len(candidate_ids)
            )

    hits = _rank(
        candidate_ids, agency_id=agent.agency_id, model=model, vector=vector, query=query, now=now
    )
    if min_similarity is not None:
        hits = [
            hit
            for hit in hits
            if (hit.similarity is None and _matched_words(hit))
            or (hit.similarity is not None and hit.similarity >= min_similarity)
        ]
    hits = hits[:k]
    if touch and hits:
        Memory.objects.filter(agency_id=agent.agency_id, id__in=[h.memory.id for h in hits]).update(
            access_count=F("access_count") + 1, last_accessed_at=now
        )
    return hits


def nearest_memory(
    *, agent: Agent, model: str, vector: Sequence[float], now: datetime | None = None
) -> tuple[uuid.UUID, float] | None:
    """(id, cosine similarity) of the agent's unexpired memory embedded by ``model`` nearest to
    ``vector``, or None: what deduplication compares a new memory with."""
    where = _MemoryFilter(agency_id=agent.agency_id, agent_id=agent.id, now=now or timezone.now())
    sql, params = where.sql(model=model)
    size_key = (Memory._meta.db_table, model, where.key())
    with steered_planner():
        found = nearest(Memory._meta.db_table, sql, params, vector, 1, size_key=size_key)
    if not found:
        return None
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT 1 - (embedding <=> %s::vector) FROM {Memory._meta.db_table} WHERE id = %s",  # noqa: S608 - constant table
            [vector_literal(vector), found[0]],
        )
        (similarity,) = cursor.fetchone()
    return found[0], float(similarity)


# --- the query -----------------------------------------------------------------------------


def embed_query(query: str, *, agency_id: uuid.UUID) -> tuple[str, list[float] | None]:
    """(the agency's current model, the query's embedding) or (model, None) on a provider
    failure or an empty query."""
    model = embeddings.model_for(agency_id)
    if not query.strip():
        return model, None
    try:
        embedded = embeddings.embed([query], agency_id=agency_id)
    except embeddings.EmbeddingError:
        logger.warning(
            "memory search without embeddings: the provider failed", extra={"agency": agency_id}
        )
        return model, None
    return embedded.model, embedded.vectors[0]


def _text_query(query: str) -> str:
    """The query's words joined by ``or`` for ``websearch_to_tsquery``: any word may match
    (ranked by how many do). Only word characters reach it, so no operator or quote of the
    user's can change its meaning, and websearch_to_tsquery never raises a syntax error."""
    words = _WORD.findall(query.replace("\x00", " "))[:QUERY_MAX_WORDS]
    return " or ".join(word for word in words if word.lower() != "or")


# --- candidates ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _MemoryFilter:
    agency_id: uuid.UUID
    agent_id: uuid.UUID
    now: datetime
    types: tuple[str, ...] = ()
    subject_type: str = ""
    subject_id: uuid.UUID | None = None

    def key(self) -> Hashable:
        """What the search's rows depend on, but the time (for the size memo)."""
        return (self.agent_id, self.types, self.subject_type, self.subject_id)

    def sql(self, *, model: str | None = None) -> tuple[str, list[Any]]:
        """The WHERE clause (and its parameters) of the memories a search may return;
        ``model``: only those embedded by it."""
        clauses = [
            "agency_id = %s",
            "agent_id = %s",
            "(expires_at IS NULL OR expires_at > %s)",
        ]
        params: list[Any] = [self.agency_id, self.agent_id, self.now]
        if model is not None:
            clauses += ["embedding_model = %s", "embedding IS NOT NULL"]
            params.append(model)
        if self.types:
            clauses.append("memory_type = ANY(%s)")
            params.append(list(self.types))
        if self.subject_type:
            clauses.append("subject_type = %s")
            params.append(self.subject_type)
        if self.subject_id is not None:
            clauses.append("subject_id = %s")
            params.append(self.subject_id)
        return " AND ".join(clauses), params


def _text_matches(where: _MemoryFilter, words: str, limit: int) -> list[uuid.UUID]:
    """The agent's memories matching any of ``words``, best ranked first; a query of stop words
    only matches nothing.

    Full text cannot use an index under row-level security (``@@`` is not leakproof), so the
    rows are read through the B-tree: for a large agent, its ``TEXT_SCAN_MAX_ROWS`` most
    important and recent memories, and every memory still without an embedding (the ones only
    words can find; a partial index holds them). The tsquery is a function in FROM: made once
    per query, not once per row (as a generic plan would)."""
    clause, params = where.sql()
    table = Memory._meta.db_table
    sql = (
        "SELECT id FROM ("  # noqa: S608 - constant table and clauses; values are parameters
        f"(SELECT id, search_vector FROM {table} WHERE {clause}"
        " ORDER BY importance DESC, created_at DESC LIMIT %s)"
        f" UNION ALL SELECT id, search_vector FROM {table} WHERE {clause} AND embedding IS NULL"
        f") AS rows, websearch_to_tsquery('{TEXT_SEARCH_CONFIG}', %s) AS words"
        " WHERE numnode(words) > 0 AND search_vector @@ words"
        " GROUP BY id ORDER BY max(ts_rank_cd(search_vector, words)) DESC, id LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, TEXT_SCAN_MAX_ROWS, *params, words, limit])
        return [row[0] for row in cursor.fetchall()]


def _most_important(
    where: _MemoryFilter, *, exclude: list[uuid.UUID], limit: int
) -> list[uuid.UUID]:
    clause, params = where.sql()
    sql = (
        f"SELECT id FROM {Memory._meta.db_table} WHERE {clause} AND NOT (id = ANY(%s))"  # noqa: S608 - constant table and clauses; values are parameters
        " ORDER BY importance DESC, created_at DESC LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, exclude, limit])
        return [row[0] for row in cursor.fetchall()]


# --- ranking ---------------------------------------------------------------------------------


# --- ranking ---------------------------------------------------------------------------------


def _rank(
    ids: list[uuid.UUID],
    *,
    agency_id: uuid.UUID,
    model: str,
    vector: list[float] | None,
    query: str,
    now: datetime,
) -> list[Hit]:
    """The candidates as hits, best first: similarity and word coverage computed in SQL (the
    vector never leaves the database), the blend here."""
    if not ids:
        return []
    memories = Memory.objects.filter(agency_id=agency_id, id__in=ids).defer(
        "embedding", "search_vector"
    )
    if vector is not None:
        similarity = RawSQL(
            "CASE WHEN embedding_model = %s AND embedding IS NOT NULL"
            " THEN 1 - (embedding <=> %s::vector) END",
            [model, vector_literal(vector)],
            output_field=FloatField(),
        )
        memories = memories.annotate(similarity=similarity)
    lexemes = f"tsvector_to_array(to_tsvector('{TEXT_SEARCH_CONFIG}', %s))"
    coverage = RawSQL(  # noqa: S611 - a constant configuration name; the query is a parameter
        f"coalesce(cardinality(ARRAY(SELECT unnest({lexemes}) INTERSECT"
        " SELECT unnest(tsvector_to_array(search_vector))))::float"
        f" / nullif(cardinality({lexemes}), 0), 0)",
        [query, query],
        output_field=FloatField(),
    )
    rows = list(memories.annotate(word_coverage=coverage))
    hits = [_hit(memory, now=now) for memory in rows]
    hits.sort(key=lambda hit: (-hit.score, -(hit.similarity or -1.0), str(hit.memory.id)))
    return hits


def _hit(memory: Memory, *, now: datetime) -> Hit:
    raw_similarity = getattr(memory, "similarity", None)
    similarity = None if raw_similarity is None else float(raw_similarity)
    words = _coverage(memory)
    # A memory not comparable by meaning (its embedding pending, or another model's) stands in
    # with the share of the query's words it contains, so that it is not last for lack of a
    # vector.
    relevance = similarity if similarity is not None else UNEMBEDDED_SIMILARITY * words
    score = (
        SIMILARITY_WEIGHT * max(relevance, 0.0)
        + TEXT_WEIGHT * words
        + IMPORTANCE_WEIGHT * (memory.importance - 1) / 9
        + RECENCY_WEIGHT * recency(memory.updated_at, now)
        + CONFIDENCE_WEIGHT * float(memory.confidence)
    )
    return Hit(memory=memory, score=round(score, 6), similarity=similarity)


def _coverage(memory: Memory) -> float:
    """The share of the query's words (lexemes) that the memory contains, 0..1."""
    return float(getattr(memory, "word_coverage", 0.0) or 0.0)


def _matched_words(hit: Hit) -> bool:
    return _coverage(hit.memory) > 0


def recency(moment: datetime, now: datetime) -> float:
    """1 now, 0.5 after RECENCY_HALF_LIFE_DAYS, towards 0 after."""
    age_days = max((now - moment).total_seconds(), 0.0) / 86400
    return math.exp(-math.log(2) * age_days / RECENCY_HALF_LIFE_DAYS)
