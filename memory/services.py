"""Writers of long-term memory (seed 004 MemoryManager ``store``): store with deduplication,
update, delete, and the record of consolidation changes (:class:`memory.models.MemoryChange`).

Embedding: a caller on a worker (a run's tool, extraction after a run) embeds synchronously
(``embed_now=True``, one short text); a web request stores the memory with no embedding and
``memory.embed_pending`` embeds it after the commit, off the request path. A memory without an
embedding is still found by its words. If the provider fails, the memory is stored all the same
and left to ``embed_pending``.
"""

from __future__ import annotations

import datetime
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, TypedDict

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from agents.models import Agent
from core import sending
from core.exceptions import ApplicationError
from memory import embeddings
from memory.embeddings.backfill import EMBED_PENDING_TASK
from memory.models import Memory, MemoryChange, MemoryChangeAction
from memory.search import nearest_memory
from memory.validation import MAX_TAGS, clean_memory_fields

logger = logging.getLogger(__name__)

# Seed 004's extractAndStore: a new memory this similar to an existing one raises that one instead.
DEDUP_SIMILARITY = 0.95
CONFIDENCE_STEP = Decimal("0.05")  # how much a reinforcing duplicate raises confidence


@dataclass(frozen=True)
class StoreResult:
    memory: Memory
    created: bool  # False: an existing near-identical memory was reinforced instead


class MemorySnapshot(TypedDict):
    """A memory as it was, in a :class:`MemoryChange` (``before`` / ``after``)."""

    id: str
    memory_type: str
    content: str
    subject_type: str
    subject_id: str | None
    importance: int
    confidence: float
    access_count: int
    tags: list[str]
    expires_at: str | None
    created_at: str | None


def memory_snapshot(memory: Memory) -> MemorySnapshot:
    return {
        "id": str(memory.id),
        "memory_type": memory.memory_type,
        "content": memory.content,
        "subject_type": memory.subject_type,
        "subject_id": str(memory.subject_id) if memory.subject_id else None,
        "importance": memory.importance,
        "confidence": float(memory.confidence),
        "access_count": memory.access_count,
        "tags": list(memory.tags),
        "expires_at": memory.expires_at.isoformat() if memory.expires_at else None,
        "created_at": memory.created_at.isoformat() if memory.created_at else None,
    }


# --- embedding ---------------------------------------------------------------------------------


def _embed(content: str, *, agency_id: uuid.UUID) -> tuple[str, list[float]] | None:
    """(model, vector) of ``content``, or None when the provider failed (logged)."""
    try:
        embedded = embeddings.embed([content], agency_id=agency_id)
    except embeddings.EmbeddingError:
        logger.warning("memory stored without embedding: the provider failed; embedded later")
        return None
    return embedded.model, embedded.vectors[0]


def _embed_later(agency_id: uuid.UUID) -> None:
    """``memory.embed_pending`` for the agency, once this transaction commits. A broker that
    refuses it is logged, not raised (the memory is stored; the caller, an after-run task among
    them, must not fail for it): beat's embed-pending sweep finds the rows."""
    sending.send_task_on_commit(
        EMBED_PENDING_TASK,
        agency_id=agency_id,
        about=f"agency {agency_id}",
        then="beat's embed-pending sweep sends it",
    )


# --- store -----------------------------------------------------------------------------------


def memory_store(
    *,
    agent: Agent,
    content: str,
    memory_type: str,
    subject_type: str = "",
    subject_id: uuid.UUID | None = None,
    confidence: float | Decimal | None = None,
    importance: int = 5,
    tags: Sequence[str] = (),
    expires_at: datetime.datetime | None = None,
    source: str = "",
    metadata: dict[str, Any] | None = None,
    dedup: bool = True,
    execution_id: uuid.UUID | None = None,
    embed_now: bool = True,
) -> StoreResult:
    """Store a memory of ``agent``, or reinforce the agent's near-identical one (``dedup``:
    cosine similarity above 0.95 with a memory of the same embedding model; without an
    embedding, the same text): its confidence and importance raised to at least the new ones,
    its access counted, and a ``dedup`` :class:`MemoryChange` recorded.

    ``embed_now``: embed here (a worker); False stores the memory unembedded and queues
    ``memory.embed_pending`` (a web request). Bad values raise ``ApplicationError("invalid")``.
    Precondition: the agent's tenant context.
    """
    fields = clean_memory_fields(
        {
            "content": content,
            "memory_type": memory_type,
            "subject_type": subject_type,
            "subject_id": subject_id,
            "confidence": confidence,
            "importance": importance,
            "tags": tags,
            "expires_at": expires_at,
            "source": source,
            "metadata": metadata,
        }
    )
    embedded = _embed(fields["content"], agency_id=agent.agency_id) if embed_now else None
    with transaction.atomic():
        if dedup:
            existing = _duplicate_of(agent, fields["content"], embedded)
            if existing is not None:
                memory, similarity = existing
                reinforced = _reinforce(
                    memory, fields, similarity=similarity, execution_id=execution_id
                )
                return StoreResult(memory=reinforced, created=False)
        memory = Memory(
            agency_id=agent.agency_id,
            agent=agent,
            site_id=agent.site_id,
            execution_id=execution_id,
            **fields,
        )
        if embedded is not None:
            memory.embedding_model, memory.embedding = embedded
        memory.save(force_insert=True)
        if embedded is None:
            _embed_later(agent.agency_id)
    return StoreResult(memory=memory, created=True)


def _duplicate_of(
    agent: Agent, content: str, embedded: tuple[str, list[float]] | None
) -> tuple[Memory, float | None] | None:
    """The agent's unexpired memory that ``content`` duplicates, with its similarity (None:
    the same text), or None."""
    now = timezone.now()
    unexpired = Memory.objects.filter(agency_id=agent.agency_id, agent=agent).filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=now)
    )
    if embedded is not None:
        model, vector = embedded
        nearest = nearest_memory(agent=agent, model=model, vector=vector, now=now)
        if nearest is not None and nearest[1] > DEDUP_SIMILARITY:
            memory = unexpired.select_for_update().filter(pk=nearest[0]).first()
            if memory is not None:
                return memory, nearest[1]
    same_text = unexpired.filter(content__iexact=content).select_for_update().first()
    return (same_text, None) if same_text is not None else None


def _reinforce(
    memory: Memory,
    fields: dict[str, Any],
    *,
    similarity: float | None,
    execution_id: uuid.UUID | None,
) -> Memory:
    before = memory_snapshot(memory)
    raised = min(Decimal("1.00"), max(memory.confidence + CONFIDENCE_STEP, fields["confidence"]))
    memory.confidence = raised.quantize(Decimal("0.01"))
    memory.importance = max(memory.importance, fields["importance"])
    memory.tags = list(dict.fromkeys([*memory.tags, *fields["tags"]]))[:MAX_TAGS]
    memory.last_accessed_at = timezone.now()
    memory.save(
        update_fields=["confidence", "importance", "tags", "last_accessed_at", "updated_at"]
    )
    Memory.objects.filter(pk=memory.pk).update(access_count=F("access_count") + 1)
    memory.refresh_from_db(fields=["access_count"])
    how = f"cosine similarity {similarity:.3f}" if similarity is not None else "the same text"
    memory_change_record(
        agent_id=memory.agent_id,
        agency_id=memory.agency_id,
        action=MemoryChangeAction.DEDUP,
        reason=(
            f"A new memory matched this one ({how}, above {DEDUP_SIMILARITY}): this one was "
            "reinforced instead of storing a copy."
        ),
        before=[before],
        after=memory_snapshot(memory),
        memory=memory,
        memory_ids=[memory.id],
        actor=fields["source"] or "memory_store",
        execution_id=execution_id,
        new_content=fields["content"],
    )
    return memory


# --- update and delete ---------------------------------------------------------------------------


def memory_update(memory: Memory, *, embed_now: bool = True, **fields: Any) -> Memory:
    """Change ``fields`` of ``memory`` (those of :data:`UPDATABLE_FIELDS`). A new content is
    embedded again (here, or by ``embed_pending`` when ``embed_now`` is False, e.g. from a web
    request); until then the memory is found by its words. Precondition: its tenant context."""
    clean = clean_memory_fields(fields, new=False)
    changed = [name for name, value in clean.items() if getattr(memory, name) != value]
    if not changed:
        return memory
    content_changed = "content" in changed
    embedded = (
        _embed(clean["content"], agency_id=memory.agency_id)
        if content_changed and embed_now
        else None
    )
    with transaction.atomic():
        for name in changed:
            setattr(memory, name, clean[name])
        update_fields = [*changed, "updated_at"]
        if content_changed:
            if embedded is not None:
                memory.embedding_model, memory.embedding = embedded
            else:
                memory.embedding_model, memory.embedding = "", None
                _embed_later(memory.agency_id)
            update_fields += ["embedding", "embedding_model"]
        memory.save(update_fields=update_fields)
    return memory


@transaction.atomic
def memory_delete(memory: Memory) -> None:
    """Delete ``memory`` for good (the right to be forgotten): the row with its embedding, and
    the consolidation records that hold its text. Precondition: its tenant context."""
    MemoryChange.objects.filter(agency_id=memory.agency_id, agent_id=memory.agent_id).filter(
        Q(memory_ids__contains=[memory.id]) | Q(memory=memory)
    ).delete()
    memory.delete()


# --- change records ------------------------------------------------------------------------------


def memory_change_record(
    *,
    agency_id: uuid.UUID,
    agent_id: uuid.UUID,
    action: str,
    reason: str,
    before: Sequence[MemorySnapshot],
    after: MemorySnapshot | None,
    memory: Memory | None,
    memory_ids: Sequence[uuid.UUID],
    actor: str,
    execution_id: uuid.UUID | None = None,
    new_content: str | None = None,
) -> MemoryChange:
    """Record what consolidation, pruning or deduplication changed and why (for staff).

    ``before``: the memories as they were (:func:`memory_snapshot`), ``after``: the result (None
    for a prune); ``memory``: the memory that remains; ``memory_ids``: every memory touched;
    ``actor``: what did it ("consolidation", "extraction", "tool:remember"). Call it in the
    transaction of the change. Precondition: the agency's tenant context.
    """
    if action not in MemoryChangeAction.values:
        raise ApplicationError("invalid", f"Unknown memory change action: {action!r}.")
    after_value: dict[str, Any] | None = dict(after) if after is not None else None
    if after_value is not None and new_content is not None:
        after_value["matched_content"] = new_content
    return MemoryChange.objects.create(
        agency_id=agency_id,
        agent_id=agent_id,
        action=action,
        reason=reason[:4000],
        before=[dict(snapshot) for snapshot in before],
        after=after_value,
        memory=memory,
        memory_ids=list(dict.fromkeys(memory_ids)),
        actor=actor[:100],
        execution_id=execution_id,
    )
