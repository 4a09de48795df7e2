"""Memory tools: ``remember`` stores a long-term memory on purpose, ``recall`` searches them.

Both act on the calling agent's own memories (seed 004 MemoryManager ``store`` and
``retrieveRelevant``), through :mod:`memory.services` and :mod:`memory.search`: ``remember``
embeds at once (the run is on a worker) and reinforces a near-identical memory instead of
storing a copy; ``recall`` is the hybrid search (meaning and words, blended with importance,
recency and confidence) and counts what it returns as accessed.
"""

from __future__ import annotations

import datetime
from typing import Any

from django.utils import timezone

from agents.models import Agent
from core.exceptions import ApplicationError
from memory.models import MemoryType
from memory.search import search_memories
from memory.services import memory_store
from tools.builtin import _args
from tools.builtin._args import INVALID
from tools.handlers import ToolContext, ToolError
from tools.registry import handler

CONTENT_MAX_CHARS = 2000
QUERY_MAX_CHARS = 1000
SUBJECT_TYPE_MAX_CHARS = 50
MAX_TAGS = 20
TAG_MAX_CHARS = 100
MAX_EXPIRY_DAYS = 3650
DEFAULT_K = 5
MAX_K = 20


def _agent(ctx: ToolContext) -> Agent:
    return Agent.objects.get(pk=ctx.agent_id, agency_id=ctx.agency_id)


def _subject(args: dict[str, Any]) -> tuple[str, Any]:
    subject_type = _args.text(args, "subject_type", max_length=SUBJECT_TYPE_MAX_CHARS)
    raw_id = args.get("subject_id")
    subject_id = _args.parse_uuid(raw_id, "subject_id") if raw_id not in (None, "") else None
    return subject_type, subject_id


def _number(value: object, name: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise ToolError(INVALID, f"'{name}' must be a number from {low:g} to {high:g}.", field=name)
    return float(value)


@handler("remember")
def remember(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    content = _args.text(args, "content", max_length=CONTENT_MAX_CHARS, required=True)
    memory_type = _args.choice(
        args.get("memory_type", MemoryType.FACT), "memory_type", MemoryType.values
    )
    subject_type, subject_id = _subject(args)
    importance = args.get("importance", 5)
    number = _args.whole_number(importance)
    if number is None or not 1 <= number <= 10:
        raise ToolError(
            INVALID, "'importance' must be a whole number from 1 to 10.", field="importance"
        )
    confidence = args.get("confidence")
    if confidence is not None:
        confidence = round(_number(confidence, "confidence", 0, 1), 2)
    tags = _args.string_list(
        args.get("tags") or [], "tags", max_items=MAX_TAGS, max_length=TAG_MAX_CHARS
    )
    expires_at = None
    if args.get("expires_in_days") is not None:
        days = _args.whole_number(args["expires_in_days"])
        if days is None or not 1 <= days <= MAX_EXPIRY_DAYS:
            raise ToolError(
                INVALID,
                f"'expires_in_days' must be a whole number from 1 to {MAX_EXPIRY_DAYS}.",
                field="expires_in_days",
            )
        expires_at = timezone.now() + datetime.timedelta(days=days)
    try:
        result = memory_store(
            agent=_agent(ctx),
            content=content,
            memory_type=memory_type,
            subject_type=subject_type,
            subject_id=subject_id,
            confidence=confidence,
            importance=number,
            tags=tags,
            expires_at=expires_at,
            source="tool:remember",
            execution_id=ctx.execution_id,
        )
    except ApplicationError as exc:
        raise ToolError(INVALID, exc.message) from None
    memory = result.memory
    return {
        "memory_id": str(memory.id),
        # "reinforced": the agent already knew this; that memory's confidence was raised.
        "status": "stored" if result.created else "reinforced",
        "memory_type": memory.memory_type,
        "confidence": float(memory.confidence),
        "importance": memory.importance,
    }


@handler("recall")
def recall(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    query = _args.text(args, "query", max_length=QUERY_MAX_CHARS, required=True)
    k = _args.bounded_int(args, "k", default=DEFAULT_K, high=MAX_K)
    types = args.get("memory_types") or []
    if not isinstance(types, list):
        raise ToolError(INVALID, "'memory_types' must be a list.", field="memory_types")
    for memory_type in types:
        _args.choice(memory_type, "memory_types", MemoryType.values)
    subject_type, subject_id = _subject(args)
    hits = search_memories(
        agent=_agent(ctx),
        query=query,
        k=k,
        types=list(dict.fromkeys(types)),
        subject_type=subject_type,
        subject_id=subject_id,
    )
    return {
        "count": len(hits),
        "memories": [
            {
                "id": str(hit.memory.id),
                "memory_type": hit.memory.memory_type,
                "content": _args.truncate(hit.memory.content),
                "subject_type": hit.memory.subject_type or None,
                "subject_id": str(hit.memory.subject_id) if hit.memory.subject_id else None,
                "importance": hit.memory.importance,
                "confidence": float(hit.memory.confidence),
                "similarity": None if hit.similarity is None else round(hit.similarity, 3),
                "score": round(hit.score, 3),
                "created_at": _args.iso(hit.memory.created_at),
            }
            for hit in hits
        ],
    }
