"""Factories of flow analysis's rows; each inherits the agency of its run or agent."""

from __future__ import annotations

import factory
from django.utils import timezone

from agents.models import AgentType, ExecutionStatus
from flow.models import (
    CompletenessAnalysis,
    ExpectedWorkflow,
    LoopDetection,
    LoopKind,
    LoopOutcome,
    StuckOutcome,
    StuckRun,
)
from tests.agents.factories import ExecutionFactory
from tests.factories import AgencyFactory, TenantFactory


class ExpectedWorkflowFactory(TenantFactory[ExpectedWorkflow]):
    class Meta:
        model = ExpectedWorkflow

    agency = factory.SubFactory(AgencyFactory)
    name = factory.Sequence(lambda n: f"Workflow {n}")
    agent_type = AgentType.SPECIALIST
    expected_states = factory.LazyFunction(
        lambda: [{"state": "running", "is_required": True}, {"state": "completed"}]
    )
    expected_actions = factory.LazyFunction(
        lambda: [{"action": "crm_get_contact", "is_required": True}]
    )


class CompletenessAnalysisFactory(TenantFactory[CompletenessAnalysis]):
    class Meta:
        model = CompletenessAnalysis

    execution = factory.SubFactory(ExecutionFactory)
    agency = factory.SelfAttribute("execution.agency")
    agent = factory.SelfAttribute("execution.agent")
    completeness_score = 0.5
    missing_actions = factory.LazyFunction(lambda: ["crm_get_contact"])


class LoopDetectionFactory(TenantFactory[LoopDetection]):
    class Meta:
        model = LoopDetection

    execution = factory.SubFactory(ExecutionFactory)
    agency = factory.SelfAttribute("execution.agency")
    agent = factory.SelfAttribute("execution.agent")
    kind = LoopKind.SAME_CALL
    outcome = LoopOutcome.STOPPED
    fingerprint = "0" * 64
    repeated = factory.LazyFunction(lambda: [{"tool": "crm_get_contact", "arguments": {}}])
    occurrences = 4
    threshold = 3


class StuckRunFactory(TenantFactory[StuckRun]):
    class Meta:
        model = StuckRun

    execution = factory.SubFactory(ExecutionFactory)
    agency = factory.SelfAttribute("execution.agency")
    agent = factory.SelfAttribute("execution.agent")
    state = ExecutionStatus.RUNNING
    state_sequence = 2
    entered_at = factory.LazyFunction(timezone.now)
    expected_seconds = 600
    expected_from = "agent"
    action_taken = StuckOutcome.NOTIFIED
