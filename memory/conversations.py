"""Short-term memory: conversations per entity, user or session (seed 004
``ai_agent_conversations``), with a window of recent messages (seed 002's thread history window).

A run whose trigger names a session (``session_id``), a contact (``contact_id``) or that a person
started continues that conversation: it starts with the conversation's last
``Agent.conversation_window`` messages (sent before its instruction, agents.runtime.context), and
when it ends its instruction and answer are appended (memory.episodes.after_run). A conversation
nobody continued for ``Agent.conversation_ttl_hours`` expires: it is no longer continued and beat
deletes it (:func:`conversations_purge_expired`).
"""

from __future__ import annotations

import datetime
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from celery import shared_task
from django.db import connection
from django.db.models import Q, QuerySet
from django.utils import timezone

from agents.llm import MessageDict
from agents.models import Agent, Execution
from core import tenancy
from memory.models import ContextType, Conversation

logger = logging.getLogger(__name__)

# Expired conversations deleted per statement, and statements per beat tick.
PURGE_BATCH = 1000
PURGE_BATCHES = 20
# One message of a conversation is kept to this many characters.
MESSAGE_CHARS = 4000


@dataclass(frozen=True, slots=True)
class ConversationKey:
    context_type: str
    context_id: uuid.UUID
    label: str  # what it is about, for people: "session", "contact", "user 42"

    def to_dict(self) -> dict[str, str]:
        return {"type": self.context_type, "id": str(self.context_id), "label": self.label}

    @classmethod
    def from_dict(cls, data: dict[str, str]) -> ConversationKey:
        return cls(data["type"], uuid.UUID(data["id"]), data.get("label", ""))


def _uuid(value: object) -> uuid.UUID | None:
    if isinstance(value, uuid.UUID):
        return value
    if not isinstance(value, str):
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


def user_context_id(user_id: int) -> uuid.UUID:
    """A user's conversations are keyed by a UUID holding the user's (integer) id."""
    return uuid.UUID(int=user_id)


def conversation_key(execution: Execution) -> ConversationKey | None:
    """Which conversation a run continues: the trigger's ``session_id``, else its
    ``contact_id`` (in the trigger data or the event's payload), else the person who started
    it; None for a run with none of them (a scheduled run, an event about nobody)."""
    data = execution.trigger_data if isinstance(execution.trigger_data, dict) else {}
    payload = data.get("payload")
    sources = [data, payload] if isinstance(payload, dict) else [data]
    for source in sources:
        session = _uuid(source.get("session_id"))
        if session is not None:
            return ConversationKey(ContextType.SESSION, session, "session")
    for source in sources:
        contact = _uuid(source.get("contact_id"))
        if contact is not None:
            return ConversationKey(ContextType.ENTITY, contact, "contact")
    if execution.triggered_by_id is not None:
        user = execution.triggered_by_id
        return ConversationKey(ContextType.USER, user_context_id(user), f"user {user}")
    return None


def _live(
    agent_id: uuid.UUID, key: ConversationKey, now: datetime.datetime
) -> QuerySet[Conversation]:
    """The conversation ``key`` of the agent that has not expired (no expiry: never expires)."""
    return (
        Conversation.objects.filter(
            agent_id=agent_id, context_type=key.context_type, context_id=key.context_id
        )
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        .order_by("-last_message_at")
    )


def conversation_window(*, agent: Agent, key: ConversationKey) -> list[MessageDict]:
    """The last ``agent.conversation_window`` messages of the live conversation ``key`` (one
    indexed read), oldest first, starting with a user message. Precondition: agency context."""
    size = agent.conversation_window
    if size <= 0:
        return []
    messages = _live(agent.id, key, timezone.now()).values_list("messages", flat=True).first()
    window: list[MessageDict] = list(messages or [])[-size:]
    while window and window[0].get("role") != "user":  # (the wire formats start with a user)
        window = window[1:]
    return window


def conversation_append(
    *,
    agent: Agent,
    key: ConversationKey,
    messages: list[MessageDict],
    tokens: int = 0,
    metadata: dict[str, Any] | None = None,
) -> Conversation:
    """Add ``messages`` to the live conversation ``key`` (started if there is none), keep its
    last ``agent.conversation_window`` messages, and push its expiry to ``conversation_ttl_hours``
    from now. The row is locked while it is changed (runs of one contact may end together).

    Precondition: in the agent's agency context."""
    now = timezone.now()
    expires = now + datetime.timedelta(hours=agent.conversation_ttl_hours)
    clipped: list[MessageDict] = [
        {"role": m["role"], "content": m["content"][:MESSAGE_CHARS]} for m in messages
    ]
    conversation = _live(agent.id, key, now).select_for_update().first()
    if conversation is None:
        conversation = Conversation(
            agency_id=agent.agency_id,
            agent=agent,
            site_id=agent.site_id,
            context_type=key.context_type,
            context_id=key.context_id,
            started_at=now,
            metadata={"label": key.label, **(metadata or {})},
        )
    kept = max(agent.conversation_window, 1)
    conversation.messages = [*(conversation.messages or []), *clipped][-kept:]
    conversation.message_count += len(clipped)
    conversation.tokens_used += tokens
    conversation.last_message_at = now
    conversation.expires_at = expires
    conversation.save()
    return conversation


def conversations_purge_expired(*, batches: int = PURGE_BATCHES) -> int:
    """Delete conversations past their ``expires_at``, every agency's, in small batches (each
    its own transaction); returns how many."""
    total = 0
    for _ in range(batches):
        with tenancy.platform_context(), connection.cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {Conversation._meta.db_table} WHERE id IN ("  # noqa: S608 - constant
                f" SELECT id FROM {Conversation._meta.db_table}"
                " WHERE expires_at < now() LIMIT %s)",
                [PURGE_BATCH],
            )
            deleted = cursor.rowcount
        total += deleted
        if deleted < PURGE_BATCH:
            break
    if total:
        logger.info("conversations: %d expired deleted", total)
    return total


@shared_task(name="memory.purge_expired_conversations", ignore_result=True)
def purge_expired_conversations() -> int:
    """Beat: expired conversations."""
    return conversations_purge_expired()
