"""What a run starts with from memory (its first claim: memory/run_plugin.py's ``setup``): the
agent's memories most relevant to its instruction, its most similar past runs, and the recent
conversation it continues."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection
from django.db.models import F
from django.utils import timezone

from agents.llm import MessageDict
from agents.models import Agent, Execution
from agents.runtime.context_window import CHARS_PER_TOKEN
from memory import conversations
from memory.models import Episode, Memory
from memory.search import search_episodes, search_memories

# Recall: candidates asked of the search (the token budget decides how many are kept), and
# what one line of the prompt may hold.
MEMORY_CANDIDATES = 10
EPISODE_CANDIDATES = 3
LINE_CHARS = 600
# Past runs take at most this share of the memory budget; memories fill the rest.
EPISODE_SHARE = 1 / 3


@dataclass(frozen=True, slots=True)
class Recalled:
    """What a run starts with from memory: prompt lines, and the conversation it continues."""

    memories: list[str] = field(default_factory=list)
    episodes: list[str] = field(default_factory=list)
    conversation: list[MessageDict] = field(default_factory=list)
    conversation_key: dict[str, str] | None = None


def recall(agent: Agent, execution: Execution) -> Recalled:
    """The agent's memories most relevant to the run's instruction (or its trigger) and its
    most similar past runs, within ``agent.memory_token_budget`` (the best first; past runs
    at most a third of it), and the last messages of the conversation the run continues.

    Cheap for an agent with nothing to recall (one indexed read, no embedding); otherwise one
    hybrid search of memories and one of episodes (memory.search). The memories kept count as
    accessed. Precondition: the run's agency context (its claim's transaction).
    """
    key = conversations.conversation_key(execution)
    window = conversations.conversation_window(agent=agent, key=key) if key else []
    found = Recalled(
        conversation=window, conversation_key=key.to_dict() if key is not None else None
    )
    budget = agent.memory_token_budget * CHARS_PER_TOKEN
    has_memories, has_episodes = _what_to_recall(agent) if budget > 0 else (False, False)
    if not (has_memories or has_episodes):
        return found
    query = execution.first_user_message()
    least = settings.AGENTDESK_MEMORY_RECALL_MIN_SIMILARITY
    similar = (
        search_episodes(agent=agent, query=query, k=EPISODE_CANDIDATES) if has_episodes else []
    )
    episodes = [(_episode_line(hit.episode), hit) for hit in similar if hit.similarity >= least]
    kept_episodes = [line for line, _ in _within(episodes, int(budget * EPISODE_SHARE))]
    hits = (
        search_memories(
            agent=agent, query=query, k=MEMORY_CANDIDATES, touch=False, min_similarity=least
        )
        if has_memories
        else []
    )
    lines = [(f"[{hit.memory.memory_type}] {_clip(hit.memory.content)}", hit) for hit in hits]
    kept = _within(lines, budget - sum(len(line) for line in kept_episodes))
    if kept:  # counted as used (what pruning reads): the ones the run is given
        used = [hit.memory.id for _, hit in kept]
        Memory.objects.filter(agency_id=agent.agency_id, id__in=used).update(
            access_count=F("access_count") + 1, last_accessed_at=timezone.now()
        )
    return Recalled(
        [line for line, _ in kept], kept_episodes, found.conversation, found.conversation_key
    )


def _what_to_recall(agent: Agent) -> tuple[bool, bool]:
    """Whether the agent has memories, and embedded episodes (one indexed read): a search of
    either costs an embedding of the instruction, not made for nothing."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT EXISTS (SELECT FROM {Memory._meta.db_table}"  # noqa: S608 - constants
            " WHERE agency_id = %s AND agent_id = %s),"
            f" EXISTS (SELECT FROM {Episode._meta.db_table}"
            " WHERE agency_id = %s AND agent_id = %s AND embedding IS NOT NULL)",
            [agent.agency_id, agent.id, agent.agency_id, agent.id],
        )
        row = cursor.fetchone()
    return (bool(row[0]), bool(row[1])) if row else (False, False)


def _within[T](lines: list[tuple[str, T]], budget: int) -> list[tuple[str, T]]:
    """The best of ``lines`` (best first) that fit in ``budget`` characters together: each
    that still fits, in order (a long one left out does not keep shorter ones out)."""
    kept: list[tuple[str, T]] = []
    used = 0
    for line, item in lines:
        if used + len(line) <= budget:
            kept.append((line, item))
            used += len(line)
    return kept


def _clip(text: str, limit: int = LINE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _episode_line(episode: Episode) -> str:
    when = timezone.localtime(episode.created_at).date().isoformat()
    situation = _clip(episode.context_summary, 200)
    line = f"{when}, {episode.trigger_event or 'run'}: {situation} -> {episode.outcome or 'open'}"
    if episode.outcome_details:
        line += f" ({_clip(episode.outcome_details, 150)})"
    if episode.lessons_learned:
        line += f". Lessons: {_clip('; '.join(episode.lessons_learned), 200)}"
    if episode.should_repeat is False:
        line += ". You would not do it this way again."
    return _clip(line)
