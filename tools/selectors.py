"""Reads behind a tool's access decision (:mod:`tools.access`). Precondition: the agency's tenant
context is set; under row-level security another agency's rows are simply not there."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence

from django.db.models import Q, QuerySet

from agents.models import Agent
from core.catalogue import CatalogueCache
from core.models import Agency
from tools import registry
from tools.access import AccessDecision, decide_tool
from tools.models import Tool

__all__ = [
    "active_tools",
    "agency_enabled_modules",
    "clear_modules_cache",
    "offered_tools",
    "tool_access_now",
]


class _AgencyNotVisible(LookupError):
    pass


# Read on every tool call that requires a module: kept per process for
# AGENTDESK_CATALOGUE_CACHE_SECONDS, like the tool catalogue itself (core.catalogue).
_modules = CatalogueCache[frozenset[str]]()


def agency_enabled_modules(agency_id: uuid.UUID | str) -> frozenset[str]:
    """The modules the agency has enabled (lower case), cached per agency id for the process:
    callers ask for their own agency (the run's, the request's). Read without a tenant that may
    see the row, the agency has none — a tool that requires a module is then refused (fail
    closed) — and that miss is not cached."""

    def load() -> frozenset[str]:
        row = Agency.objects.filter(pk=agency_id).values_list("enabled_modules", flat=True)
        modules = row.first()
        if modules is None:
            raise _AgencyNotVisible(str(agency_id))
        return frozenset(m.strip().lower() for m in modules)

    try:
        return _modules.get(str(agency_id), load)
    except _AgencyNotVisible:
        return frozenset()


def clear_modules_cache() -> None:
    _modules.clear()


def active_tools(agency_id: uuid.UUID | str) -> QuerySet[Tool]:
    """The active tools an agency's agents may be given: its own and the platform's."""
    return Tool.objects.filter(Q(agency_id=agency_id) | Q(agency__isnull=True), is_active=True)


def offered_tools(
    tools: Iterable[Tool],
    *,
    allowed: Sequence[str],
    denied: Sequence[str],
    enabled_modules: frozenset[str],
) -> list[Tool]:
    """Those of ``tools`` a run of an agent with these patterns is offered (tools.access): a
    handler installed, the name allowed, every required permission and module present."""
    return [
        tool
        for tool in tools
        if registry.is_installed(tool.name)
        and decide_tool(
            tool.name,
            requires_permissions=tool.requires_permissions,
            requires_modules=tool.requires_modules,
            allowed=allowed,
            denied=denied,
            enabled_modules=enabled_modules,
        ).allowed
    ]


def tool_access_now(
    *, agency_id: uuid.UUID | str, agent_id: uuid.UUID | str, tool_name: str
) -> AccessDecision | None:
    """Whether the agent could use ``tool_name`` under the configuration as it is now (the
    agent's patterns, the tool's requirements, the agency's modules). ``None`` when the agency
    has no such active tool with a handler installed, or no such agent.

    Only for explaining a refusal (a call of a tool its run was not offered): three reads, off
    the hot path.
    """
    if not registry.is_installed(tool_name):
        return None
    tool = (
        active_tools(agency_id)
        .filter(name=tool_name)
        .values("requires_permissions", "requires_modules")
        .first()
    )
    agent = (
        Agent.objects.filter(pk=agent_id, agency_id=agency_id)
        .values("allowed_tools", "denied_tools")
        .first()
    )
    if tool is None or agent is None:
        return None
    return decide_tool(
        tool_name,
        requires_permissions=tool["requires_permissions"],
        requires_modules=tool["requires_modules"],
        allowed=agent["allowed_tools"],
        denied=agent["denied_tools"],
        enabled_modules=agency_enabled_modules(agency_id),
    )
