"""Memory app factories. Children take their agency and site from their agent."""

from __future__ import annotations

import factory

from memory.models import (
    ContextType,
    Conversation,
    Episode,
    EpisodeOutcome,
    Memory,
    MemoryChange,
    MemoryChangeAction,
    MemoryType,
)
from tests.agents.factories import AgentFactory
from tests.factories import TenantFactory


class MemoryFactory(TenantFactory[Memory]):
    class Meta:
        model = Memory

    agent = factory.SubFactory(AgentFactory)
    agency = factory.SelfAttribute("agent.agency")
    site = factory.SelfAttribute("agent.site")
    memory_type = MemoryType.FACT
    content = factory.Sequence(lambda n: f"Fact number {n}")


class EpisodeFactory(TenantFactory[Episode]):
    class Meta:
        model = Episode

    agent = factory.SubFactory(AgentFactory)
    agency = factory.SelfAttribute("agent.agency")
    site = factory.SelfAttribute("agent.site")
    outcome = EpisodeOutcome.SUCCESS


class ConversationFactory(TenantFactory[Conversation]):
    class Meta:
        model = Conversation

    agent = factory.SubFactory(AgentFactory)
    agency = factory.SelfAttribute("agent.agency")
    site = factory.SelfAttribute("agent.site")
    context_type = ContextType.SESSION


class MemoryChangeFactory(TenantFactory[MemoryChange]):
    class Meta:
        model = MemoryChange

    agent = factory.SubFactory(AgentFactory)
    agency = factory.SelfAttribute("agent.agency")
    action = MemoryChangeAction.PRUNE
    reason = "Importance below 3, used fewer than twice, older than 30 days."
    actor = "consolidation"
