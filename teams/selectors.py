"""Reads of agent-to-agent communication (seed 003): a run's messages, for its page (and its
diagram)."""

from __future__ import annotations

import uuid

from django.db.models import Q, QuerySet

from agents.models import AgentMessage


def messages_of(execution_id: uuid.UUID) -> QuerySet[AgentMessage]:
    """The messages ``execution`` sent or received, oldest first, with both runs and agents.
    Precondition: the agency's context (row-level security keeps other agencies' out)."""
    return (
        AgentMessage.objects.filter(
            Q(from_execution_id=execution_id) | Q(to_execution_id=execution_id)
        )
        .select_related("from_execution", "to_execution", "from_agent", "to_agent")
        .order_by("sent_at", "created_at")
    )
