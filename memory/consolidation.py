"""Consolidation and pruning of each agent's memories, on beat (seed 004's
``MemoryManager.consolidate``): an agent with fewer than
``AGENTDESK_MEMORY_CONSOLIDATION_MIN_MEMORIES`` (100) memories is left alone; otherwise

* **merge**: near-duplicates (cosine similarity above ``AGENTDESK_MEMORY_MERGE_SIMILARITY``, of
  the same subject) become one memory: the agent's model writes the merged text, the most
  important of them keeps it (with the highest importance and confidence, the tags of all, the
  accesses of all) and the others are deleted in the same transaction;
* **prune**: memories less important than 3, used fewer than 2 times and older than 30 days (the
  seed's thresholds, ``AGENTDESK_MEMORY_PRUNE_*``) are deleted.

Every change is recorded (memory.MemoryChange: what, the memories as they were, why), so staff see
what the agent merged or forgot. Each tick compares only the memories changed since the agent's
last consolidation (``Agent.memory_consolidated_at``) with all of the agent's memories, in
bounded batches; merges and prunes per tick are bounded too, the rest waits for the next tick.
"""

from __future__ import annotations

import datetime
import logging
import uuid
from dataclasses import dataclass, field

from celery import shared_task
from django.conf import settings
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from agents.llm import Message
from agents.models import Agent
from core import tenancy
from memory import embeddings
from memory.model_calls import agent_model_call
from memory.models import Memory, MemoryChangeAction

logger = logging.getLogger(__name__)

ACTOR = "consolidation"
# Memories changed since the last tick compared per agent and tick, and the similarity matrix's
# rows computed at once (COMPARE_CHUNK x the agent's memories).
COMPARE_BATCH = 1000
COMPARE_CHUNK = 128
MAX_CLUSTER = 8  # memories merged into one at most
MAX_MERGES = 20  # per agent and tick (each a model call)
PRUNE_BATCH = 500  # per agent and tick
MERGE_MAX_TOKENS = 400

MERGE_PROMPT = (
    "You maintain an AI agent's long-term memory. The memories below say nearly the same thing. "
    "Write ONE memory that replaces them all: a single clear, self-contained statement that keeps "
    "every distinct fact, name, number and condition they hold, resolves repetition, and keeps "
    "the newest version where they disagree. Answer with the memory's text only."
)


@dataclass
class Consolidated:
    """What one agent's consolidation did."""

    merged: int = 0  # memories merged away (deleted into another)
    merges: int = 0  # merged memories written
    pruned: int = 0
    skipped: str = ""  # why the agent was left alone
    errors: list[str] = field(default_factory=list)


@shared_task(name="memory.consolidate_all", ignore_result=True)
def consolidate_all() -> int:
    """Beat: every agent with enough memories, each in its own agency context; returns the
    memories merged away or pruned. An agent that fails is logged and the others go on."""
    least = settings.AGENTDESK_MEMORY_CONSOLIDATION_MIN_MEMORIES
    with tenancy.platform_context():
        agents = list(
            Memory.objects.values("agency_id", "agent_id")
            .annotate(memories=Count("id"))
            .filter(memories__gte=least)
            .order_by("agency_id", "agent_id")
        )
    total = 0
    for row in agents:
        try:
            done = consolidate_agent(agent_id=row["agent_id"], agency_id=row["agency_id"])
        except Exception:
            logger.exception("consolidation: agent %s failed", row["agent_id"])
            continue
        total += done.merged + done.pruned
    if agents:
        logger.info("consolidation: %d memories merged or pruned, %d agents", total, len(agents))
    return total


def _unexpired(agent_id: uuid.UUID, now: datetime.datetime) -> QuerySet[Memory]:
    return Memory.objects.filter(agent_id=agent_id).filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=now)
    )


def consolidate_agent(*, agent_id: uuid.UUID, agency_id: uuid.UUID) -> Consolidated:
    """Merge and prune one agent's memories (module docstring). Model calls hold no
    transaction; each merge and each prune batch is one. Precondition: no transaction."""
    started = timezone.now()
    done = Consolidated()
    with tenancy.agency_context(agency_id):
        agent = Agent.objects.filter(pk=agent_id).first()
        if agent is None:
            done.skipped = "no such agent"
            return done
        count = Memory.objects.filter(agent_id=agent_id).count()
        if count < settings.AGENTDESK_MEMORY_CONSOLIDATION_MIN_MEMORIES:
            done.skipped = f"{count} memories"
            return done
        model = embeddings.model_for(agency_id)
        changed = _changed_since(agent, model, started)
        clusters = _clusters(agent, model, changed, started) if changed else []
    for cluster in clusters[:MAX_MERGES]:
        try:
            merged = merge_memories(agent=agent, cluster=cluster)
        except Exception as exc:  # one bad merge must not stop the agent's others
            logger.exception("consolidation: merge of %s failed", [str(c) for c, _ in cluster])
            done.errors.append(f"{type(exc).__name__}: {exc}")
            continue
        if merged:
            done.merges += 1
            done.merged += merged
    done.pruned = prune_memories(agent=agent, now=started)
    # The next tick compares what changed after the last memory compared now; or, when all
    # were, after this tick started (merges made since are compared again next time).
    marker = changed[-1][1] if len(changed) >= COMPARE_BATCH else started
    with tenancy.agency_context(agency_id):
        Agent.objects.filter(pk=agent_id).update(memory_consolidated_at=marker)
    return done


def _changed_since(
    agent: Agent, model: str, now: datetime.datetime
) -> list[tuple[uuid.UUID, datetime.datetime]]:
    """The agent's embedded memories changed since its last consolidation (the oldest
    first, at most COMPARE_BATCH)."""
    rows = _unexpired(agent.id, now).filter(embedding_model=model, embedding__isnull=False)
    if agent.memory_consolidated_at is not None:
        rows = rows.filter(updated_at__gt=agent.memory_consolidated_at)
    return list(rows.order_by("updated_at", "id").values_list("id", "updated_at")[:COMPARE_BATCH])


# A cluster: (memory id, its similarity to the first), the first being the memory it was found
# from (a changed one).
type Cluster = list[tuple[uuid.UUID, float]]


def _clusters(
    agent: Agent,
    model: str,
    changed: list[tuple[uuid.UUID, datetime.datetime]],
    now: datetime.datetime,
) -> list[Cluster]:
    """Groups of near-duplicates among the agent's memories, each around a changed memory:
    the memories of the same subject more similar to it than the threshold (no chaining: A
    near B and B near C does not put A with C), the most similar first, at most MAX_CLUSTER.
    A memory is in one group at most. Precondition: agency context."""
    rows = list(
        _unexpired(agent.id, now)
        .filter(embedding_model=model, embedding__isnull=False)
        .values_list("id", "subject_type", "subject_id", "embedding")
    )
    if len(rows) < 2:
        return []
    import numpy as np  # noqa: PLC0415 - loaded by the beat job, not by every process

    ids = [row[0] for row in rows]
    subjects = [(row[1], row[2]) for row in rows]
    vectors = np.asarray([row[3] for row in rows], dtype=np.float32)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    position = {memory_id: index for index, memory_id in enumerate(ids)}
    centres = [position[memory_id] for memory_id, _ in changed if memory_id in position]
    threshold = settings.AGENTDESK_MEMORY_MERGE_SIMILARITY
    taken: set[int] = set()
    clusters: list[Cluster] = []
    for start in range(0, len(centres), COMPARE_CHUNK):
        chunk = centres[start : start + COMPARE_CHUNK]
        similarities = vectors[chunk] @ vectors.T
        for row, centre in zip(similarities, chunk, strict=True):
            if centre in taken:
                continue
            near = np.flatnonzero(row > threshold)
            members = [
                (int(i), float(row[i]))
                for i in near
                if i != centre and int(i) not in taken and subjects[i] == subjects[centre]
            ]
            if not members:
                continue
            members.sort(key=lambda member: -member[1])
            group = [(centre, 1.0), *members[: MAX_CLUSTER - 1]]
            taken.update(index for index, _ in group)
            clusters.append([(ids[index], similarity) for index, similarity in group])
    return clusters


def merge_memories(*, agent: Agent, cluster: Cluster) -> int:
    """Merge ``cluster`` into its most important memory: the text by the agent's model (outside
    any transaction), then in one transaction the kept memory rewritten (and embedded again),
    the others deleted and the change recorded. Returns how many were deleted (0: the memories
    changed meanwhile, or the model gave no text; nothing written)."""
    from memory.services import (  # noqa: PLC0415 - services import search, models
        memory_change_record,
        memory_snapshot,
        memory_update,
    )

    ids = [memory_id for memory_id, _ in cluster]
    with tenancy.agency_context(agent.agency_id):
        memories = list(
            Memory.objects.filter(agent_id=agent.id, id__in=ids).defer("embedding", "search_vector")
        )
    if len(memories) < 2:
        return 0
    versions = {m.id: m.updated_at for m in memories}
    listed = "\n".join(
        f"- [{m.memory_type}, {m.created_at:%Y-%m-%d}] {m.content}"
        for m in sorted(memories, key=lambda m: m.created_at)
    )
    call = agent_model_call(
        agent=agent,
        messages=[Message.system(MERGE_PROMPT), Message.user(listed)],
        max_tokens=MERGE_MAX_TOKENS,
        purpose="memory_merge",
    )
    text = " ".join(call.text.split())
    if not text:
        logger.info("consolidation: no merged text for %s (%s)", ids, call.skipped or "empty")
        return 0
    with tenancy.agency_context(agent.agency_id):
        locked = list(
            Memory.objects.select_for_update()
            .filter(agent_id=agent.id, id__in=ids)
            .defer("embedding", "search_vector")
        )
        if len(locked) != len(memories) or any(m.updated_at != versions[m.id] for m in locked):
            return 0  # changed (or deleted) while the model wrote: the next tick sees it again
        keeper = max(locked, key=lambda m: (m.importance, m.access_count, m.created_at))
        others = [m for m in locked if m.id != keeper.id]
        before = [memory_snapshot(m) for m in (keeper, *others)]
        expiries = [m.expires_at for m in locked]
        memory_update(
            keeper,
            content=text,
            importance=max(m.importance for m in locked),
            confidence=max(m.confidence for m in locked),
            tags=list(dict.fromkeys(tag for m in (keeper, *others) for tag in m.tags))[:20],
            expires_at=None if None in expiries else max(e for e in expiries if e is not None),
        )
        accesses = sum(m.access_count for m in locked)
        last_access = max((m.last_accessed_at for m in locked if m.last_accessed_at), default=None)
        Memory.objects.filter(pk=keeper.pk).update(
            access_count=accesses, last_accessed_at=last_access
        )
        keeper.access_count, keeper.last_accessed_at = accesses, last_access
        Memory.objects.filter(id__in=[m.id for m in others]).delete()
        closest = min(similarity for _, similarity in cluster[1:])
        memory_change_record(
            agency_id=agent.agency_id,
            agent_id=agent.id,
            action=MemoryChangeAction.MERGE,
            reason=(
                f"{len(locked)} memories said nearly the same thing (cosine similarity "
                f"{closest:.3f} or more, above {settings.AGENTDESK_MEMORY_MERGE_SIMILARITY}): "
                f"merged into one, its text written by {call.model or 'the model'}; "
                f"{len(others)} deleted."
            ),
            before=before,
            after=memory_snapshot(keeper),
            memory=keeper,
            memory_ids=[m.id for m in locked],
            actor=ACTOR,
        )
    return len(others)


def prune_memories(*, agent: Agent, now: datetime.datetime) -> int:
    """Delete the agent's memories that are unimportant, rarely used and old (the seed's
    thresholds), at most PRUNE_BATCH, each with a change record saying why, in one
    transaction. Returns how many."""
    from memory.services import memory_change_record, memory_snapshot  # noqa: PLC0415

    importance = settings.AGENTDESK_MEMORY_PRUNE_IMPORTANCE
    accesses = settings.AGENTDESK_MEMORY_PRUNE_ACCESS
    days = settings.AGENTDESK_MEMORY_PRUNE_AGE_DAYS
    cutoff = now - datetime.timedelta(days=days)
    with tenancy.agency_context(agent.agency_id):
        doomed = list(
            Memory.objects.select_for_update(skip_locked=True)
            .filter(
                agent_id=agent.id,
                importance__lt=importance,
                access_count__lt=accesses,
                created_at__lt=cutoff,
            )
            .defer("embedding", "search_vector")
            .order_by("created_at")[:PRUNE_BATCH]
        )
        for memory in doomed:
            age = (now - memory.created_at).days
            memory_change_record(
                agency_id=agent.agency_id,
                agent_id=agent.id,
                action=MemoryChangeAction.PRUNE,
                reason=(
                    f"Pruned: importance {memory.importance} (below {importance}), used "
                    f"{memory.access_count} time(s) (fewer than {accesses}), {age} days old "
                    f"(more than {days})."
                ),
                before=[memory_snapshot(memory)],
                after=None,
                memory=None,
                memory_ids=[memory.id],
                actor=ACTOR,
            )
        Memory.objects.filter(id__in=[m.id for m in doomed]).delete()
    return len(doomed)
