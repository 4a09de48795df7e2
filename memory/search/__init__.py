"""Hybrid search of an agent's memories and episodes (seed 004 ``search_agent_memories``).

A search gathers candidates two ways and re-ranks them with one blend:

* **by meaning**: the ``4 * k`` memories nearest to the query's embedding by cosine distance,
  among those embedded by the agency's current model (never another model's vectors);
* **by words**: the ``2 * k`` best PostgreSQL full-text matches (``search_vector``, any of the
  query's words, ``ts_rank_cd``), which also finds memories whose embedding is pending;

then scores each ``SIMILARITY_WEIGHT * similarity + TEXT_WEIGHT * share of the query's words it
contains + IMPORTANCE_WEIGHT * importance + RECENCY_WEIGHT * recency + CONFIDENCE_WEIGHT *
confidence`` (a memory without a comparable vector stands in with its words) and returns the
best k. Should fewer than k candidates come back, the agent's most important remaining memories
complete them.

**It returns k hits when k memories match the filters, whatever the plan.** pgvector's HNSW index
is approximate and, filtered to one agent, the planner's default plan drops most of its results
after the scan (recall@10 of 0.08 measured unprepared on a 2,000-row agent). So the nearest
neighbours are found one of two ways, chosen by how many rows match the filters:

* **exact** first: the distance of every matching row, read through the B-tree on (agency,
  agent, ...) and capped at ``AGENTDESK_MEMORY_EXACT_SEARCH_MAX_ROWS`` + 1 rows. The scan sits in
  a MATERIALIZED CTE, so no plan, custom or generic (prepared), can swap in the approximate
  index. Fewer rows than the cap: that is the answer;
* more: **HNSW with an iterative scan** (pgvector 0.8 ``hnsw.iterative_scan = relaxed_order``,
  ``hnsw.ef_search`` 40) and ``enable_sort = off``, under which every plan but the index's
  ordered scan carries a sort and so loses: prepared or not, the index is used and keeps
  scanning until the LIMIT is filled. A process remembers such large searches for a few minutes
  and goes to the index directly. Should the scan stop early (``hnsw.max_scan_tuples``) with
  fewer rows than asked for, the exact scan runs uncapped instead.

The search by words reads the agent's rows too (under row-level security ``@@`` cannot use an
index): all of them, or the ``TEXT_SCAN_MAX_ROWS`` most important and recent ones of a large
agent plus those still waiting for an embedding. The planner settings are made for the
candidate queries and put back after them. Every query filters by agency and agent and runs under
the caller's tenant context: row-level security keeps other agencies' rows out as well. Expired
memories are never candidates.
"""

from memory.search.episodes import EpisodeHit, search_episodes
from memory.search.memories import MAX_K, QUERY_MAX_CHARS, Hit, nearest_memory, search_memories
from memory.search.nearest import clear_size_memo

__all__ = [
    "MAX_K",
    "QUERY_MAX_CHARS",
    "EpisodeHit",
    "Hit",
    "clear_size_memo",
    "nearest_memory",
    "search_episodes",
    "search_memories",
]
