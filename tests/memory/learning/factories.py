"""Learning factories: rows take their agency and agent from their run."""

from __future__ import annotations

import factory
from django.utils import timezone

from memory.learning.models import Investigation, LearnedPattern, PatternUse, RunQuality
from tests.agents.factories import AgentFactory, ExecutionFactory
from tests.factories import TenantFactory


class LearnedPatternFactory(TenantFactory[LearnedPattern]):
    class Meta:
        model = LearnedPattern

    agent = factory.SubFactory(AgentFactory)
    agency = factory.SelfAttribute("agent.agency")
    task_type = "manual:find/contact"
    description = "Find the contact Ada Lovelace."
    tool_sequence = factory.LazyFunction(lambda: ["crm_search_contacts"])
    steps = factory.LazyFunction(
        lambda: [{"tool": "crm_search_contacts", "arguments": {"query": "<query>"}}]
    )
    success_count = 1


class RunQualityFactory(TenantFactory[RunQuality]):
    class Meta:
        model = RunQuality

    execution = factory.SubFactory(ExecutionFactory, status="completed")
    agency = factory.SelfAttribute("execution.agency")
    agent = factory.SelfAttribute("execution.agent")
    score = 0.9
    threshold = 0.8
    signals = factory.LazyFunction(
        lambda: {"goal": {"value": 1.0, "weight": 1.0, "contribution": 1.0, "detail": "done"}}
    )
    scored_at = factory.LazyFunction(timezone.now)


class InvestigationFactory(TenantFactory[Investigation]):
    class Meta:
        model = Investigation

    execution = factory.SubFactory(ExecutionFactory)
    agency = factory.SelfAttribute("execution.agency")
    agent = factory.SelfAttribute("execution.agent")
    tool_name = "crm_search_contacts"
    trigger = "empty_result"
    tool_result = factory.LazyFunction(lambda: {"contacts": [], "count": 0})
    started_at_step = 2
    steps_granted = 2


class PatternUseFactory(TenantFactory[PatternUse]):
    class Meta:
        model = PatternUse

    pattern = factory.SubFactory(LearnedPatternFactory)
    agency = factory.SelfAttribute("pattern.agency")
    execution = factory.SubFactory(ExecutionFactory, agent=factory.SelfAttribute("..pattern.agent"))
    similarity = 0.9
