"""What a run starts with, decided once at its first claim and kept in ``config_snapshot``:
the tools it may use, what the run plugins add (memory/run_plugin.py: recalled memories, similar
past runs, the conversation; teams/run_plugin.py: a delegated run's narrowed tools), the
rendered system prompt; and the agent version it started on, whose configuration it keeps to
its end (:func:`pinned_agent`)."""

from __future__ import annotations

import logging

from django.db import connection

from agents.models import Agent, AgentVersion, Execution
from agents.runtime.context import ConfigSnapshot, build_system_prompt
from agents.runtime.plugins import RunSetup
from agents.runtime.plugins import plugins as run_plugins
from agents.runtime.providers import provider_config_for
from agents.services.versions import config_fields
from core.catalogue import CatalogueCache
from tools.policy import ToolPolicy
from tools.selectors import active_tools, agency_enabled_modules, offered_tools

logger = logging.getLogger(__name__)

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
    configuration, it is the version of exactly that configuration, at no extra query.

    A run created on a chosen version (``execution.agent_version_id`` already set: an
    experiment's), or one a plugin's ``version`` hook names (a canary's), starts on that
    version's configuration instead, put on ``agent`` (in memory, never saved) before anything
    is rendered, so the tools offered, the prompt and the model are that version's."""
    plugins = run_plugins()
    if execution.agent_version_id is None:
        execution.agent_version_id = plugins.version(execution)
    chosen = execution.agent_version_id
    if chosen is not None and chosen != agent.current_version_id:
        pinned_agent(agent, execution)
        agent.current_version_id = chosen  # in memory: the version the run records
    setup = RunSetup(agent, execution, usable_tools(agent))
    plugins.setup(setup)  # the features' say (agents/runtime/plugins.py)
    goals = open_goals(agent)
    prompt = build_system_prompt(
        agent,
        goals=goals,
        tool_names=[t["name"] for t in setup.tools],
        memories=setup.memories,
        episodes=setup.episodes,
    )
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
    if agent.input_schema:
        snapshot["inputs"] = list(agent.input_schema.get("properties") or {})
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
