"""What a run starts with, decided once at its first claim and kept in ``config_snapshot``:
the tools it may use, what it recalls (memories and similar past runs, the recent conversation),
the rendered system prompt; and the agent version it started on, whose configuration it keeps to
its end (:func:`pinned_agent`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection
from django.db.models import F
from django.utils import timezone

from agents.llm import MessageDict
from agents.models import Agent, AgentVersion, Execution
from agents.runtime.context import ConfigSnapshot, build_system_prompt, first_user_message
from agents.runtime.context_window import CHARS_PER_TOKEN
from agents.runtime.plugins import RunSetup
from agents.runtime.plugins import plugins as run_plugins
from agents.runtime.providers import provider_config_for
from agents.services.versions import config_fields
from core.catalogue import CatalogueCache
from memory import conversations
from memory.learning import patterns as learned
from memory.models import Episode, Memory
from memory.search import search_episodes, search_memories
from tools.executor import ToolPolicy
from tools.selectors import active_tools, agency_enabled_modules, offered_tools

logger = logging.getLogger(__name__)

# Recall: candidates asked of the search (the token budget decides how many are kept), and
# what one line of the prompt may hold.
MEMORY_CANDIDATES = 10
EPISODE_CANDIDATES = 3
LINE_CHARS = 600
# Past runs take at most this share of the memory budget; memories fill the rest.
EPISODE_SHARE = 1 / 3


# The tool catalogue changes rarely and every run starts by reading it: kept per agency, tool
# patterns and enabled modules (core.catalogue).
_tools = CatalogueCache[list[ToolPolicy]]()


def usable_tools(agent: Agent) -> list[ToolPolicy]:
    """The tools a run of ``agent`` is offered (tools.access): active, with a handler installed,
    the name allowed by the agent's patterns (denied wins), every required permission granted by
    the same patterns and every required module enabled for the agency."""
    modules = agency_enabled_modules(agent.agency_id)
    key = (
        agent.agency_id,
        tuple(agent.allowed_tools),
        tuple(agent.denied_tools),
        tuple(sorted(modules)),
    )
    return _tools.get(key, lambda: _load_tools(agent, modules))


def clear_tool_cache() -> None:
    _tools.clear()


def _load_tools(agent: Agent, modules: frozenset[str]) -> list[ToolPolicy]:
    """Seed 004's ``getAvailableTools`` (name patterns) joined with its ``PermissionChecker``
    (required permissions against the same ``allowed_tools`` / ``denied_tools``) and the agency's
    modules: a tool failing any check is left out of the run's tool definitions, so the model
    is never offered it. A call of it anyway is refused by tools.executor."""
    tools = offered_tools(
        active_tools(agent.agency_id).order_by("name"),
        allowed=agent.allowed_tools,
        denied=agent.denied_tools,
        enabled_modules=modules,
    )
    return [
        {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters_schema,
            "tool_id": str(tool.id),
            "dangerous": tool.is_dangerous,
            "rate_limit_per_minute": tool.rate_limit_per_minute,
            "rate_limit_per_hour": tool.rate_limit_per_hour,
            # Checked again at each call: the agency may turn a module off mid-run.
            "requires_modules": list(tool.requires_modules),
        }
        for tool in tools
    ]


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
    query = first_user_message(execution)
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


def open_goals(agent: Agent) -> list[tuple[str, str]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name, description FROM agents_agentgoal"
            " WHERE agent_id = %s AND NOT is_achieved ORDER BY priority DESC, created_at",
            [agent.id],
        )
        return [(name, description) for name, description in cursor.fetchall()]


def build_snapshot(agent: Agent, execution: Execution) -> ConfigSnapshot:
    """The run's snapshot; also notes on ``execution`` (``agent_version_id``, for the caller to
    write with it) the version the agent's row names: read in the same row as the
    configuration, it is the version of exactly that configuration, at no extra query."""
    plugins = run_plugins()
    tools = usable_tools(agent)  # (a delegated run's: narrowed by teams' plugin)
    recalled = recall(agent, execution)
    setup = RunSetup(
        agent,
        execution,
        tools,
        list(recalled.memories),
        list(recalled.episodes),
        list(recalled.conversation),
        recalled.conversation_key,
    )
    plugins.setup(setup)  # the features' say (agents/runtime/plugins.py)
    goals = open_goals(agent)
    prompt = build_system_prompt(
        agent,
        goals=goals,
        tool_names=[t["name"] for t in setup.tools],
        memories=setup.memories,
        episodes=setup.episodes,
    )
    prompt = learned.with_patterns(prompt, agent, execution)  # approaches that worked before
    # The trigger goes into the first user message, not the system prompt.
    execution.agent_version_id = agent.current_version_id
    snapshot: ConfigSnapshot = {
        "agent_name": agent.name,
        "system_prompt": prompt,
        "tools": setup.tools,
        "llm_provider": agent.llm_provider,
        # The model the run is priced and recorded at, and the one it asks for.
        "llm_model": agent.llm_model or provider_config_for(agent, agency_id=agent.agency_id).model,
        "temperature": float(agent.temperature),
        "max_tokens": agent.max_tokens,
        "max_steps_per_run": agent.max_steps_per_run,
        "max_tool_calls_per_step": agent.max_tool_calls_per_step,
        "timeout_seconds": agent.timeout_seconds,
        "memories": setup.memories,
        "episodes": setup.episodes,
        "context_token_budget": agent.context_token_budget,
    }
    if setup.conversation_key is not None:
        snapshot["conversation_key"] = setup.conversation_key
    if setup.conversation:
        snapshot["conversation"] = setup.conversation
    plugins.snapshot(setup, snapshot)
    return snapshot


def pinned_agent(agent: Agent, execution: Execution) -> Agent:
    """``agent`` as configured by the version ``execution`` started on, for a run resumed after
    the agent was edited: what a run reads from its agent beyond its snapshot (the provider and
    model it calls, its constraints for approvals, ``max_corrections``) stays the version's to
    the run's end. Switches and stats stay the agent's (a deactivated agent's run still stops).

    One read, only when the agent's current version is no longer the run's; the agent row is
    never written or locked here. Precondition: in the execution's agency context."""
    pinned = execution.agent_version_id
    if pinned is None or pinned == agent.current_version_id:
        return agent
    config = AgentVersion.objects.filter(pk=pinned).values_list("config", flat=True).first()
    if config is None:
        return agent
    for name, value in config_fields(config).items():
        setattr(agent, name, value)
    return agent
