"""Reads of agent memory. Searching by relevance is :mod:`memory.search`."""

from __future__ import annotations

import uuid

from django.db.models import Q, QuerySet
from django.http import Http404
from django.utils import timezone

from agents.models import Agent
from memory.models import Memory, MemoryChange


def agent_memories(*, agent: Agent, include_expired: bool = True) -> QuerySet[Memory]:
    """The agent's memories, without their vectors (large, and meaningless to read)."""
    memories = Memory.objects.filter(agency_id=agent.agency_id, agent=agent).defer(
        "embedding", "search_vector"
    )
    if not include_expired:
        memories = memories.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now()))
    return memories


def access_memory(*, agent: Agent, memory_id: uuid.UUID | str) -> Memory:
    """One memory of ``agent``: another agent's, another agency's and a missing one (or a
    malformed id) are the same 404."""
    try:
        return agent_memories(agent=agent).get(pk=uuid.UUID(str(memory_id)))
    except (Memory.DoesNotExist, ValueError) as exc:
        raise Http404("No memory matches the given query.") from exc


def memory_changes(*, agent: Agent) -> QuerySet[MemoryChange]:
    """What consolidation, pruning and deduplication changed in the agent's memories, newest
    first."""
    return MemoryChange.objects.filter(agency_id=agent.agency_id, agent=agent)
