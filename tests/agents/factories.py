"""Agents app factories. Children take their agency (and site) from their parent row."""

from __future__ import annotations

from typing import Any

import factory
from django.utils import timezone

from agents.models import (
    AfterRunWork,
    Agent,
    AgentGoal,
    AgentMessage,
    AgentTemplate,
    AgentType,
    DecisionPoint,
    DecisionType,
    Execution,
    ExecutionStatus,
    ExecutionStep,
    LLMProvider,
    MessageType,
    ProviderName,
    StateTransition,
    StepType,
    TriggerLog,
    TriggerOutcome,
    TriggerType,
)
from tests.factories import AgencyFactory, SiteFactory, TenantFactory


class AgentFactory(TenantFactory[Agent]):
    class Meta:
        model = Agent

    agency = factory.SubFactory(AgencyFactory)
    site = factory.SubFactory(SiteFactory, agency=factory.SelfAttribute("..agency"))
    name = factory.Sequence(lambda n: f"Agent {n}")
    slug = factory.Sequence(lambda n: f"agent-{n}")
    agent_type = AgentType.ASSISTANT
    system_prompt = "You help the agency's staff."
    allowed_tools = factory.LazyFunction(lambda: ["crm_*"])
    is_active = True
    # Off unless a test asks for it: extraction is one more model call after each run, which
    # scripts of the fake provider (by turn, counted requests) do not expect.
    memory_extraction_enabled = False


class AgentTemplateFactory(TenantFactory[AgentTemplate]):
    """An agency's own template (platform templates come from the data migration)."""

    class Meta:
        model = AgentTemplate

    agency = factory.SubFactory(AgencyFactory)
    slug = factory.Sequence(lambda n: f"template-{n}")
    name = factory.Sequence(lambda n: f"Template {n}")
    agent_type = AgentType.SPECIALIST
    system_prompt = "You are a specialist."


class AgentGoalFactory(TenantFactory[AgentGoal]):
    class Meta:
        model = AgentGoal

    agent = factory.SubFactory(AgentFactory)
    agency = factory.SelfAttribute("agent.agency")
    name = factory.Sequence(lambda n: f"Goal {n}")


class ExecutionFactory(TenantFactory[Execution]):
    class Meta:
        model = Execution

    agent = factory.SubFactory(AgentFactory)
    agency = factory.SelfAttribute("agent.agency")
    site = factory.SelfAttribute("agent.site")
    trigger_type = TriggerType.MANUAL
    status = ExecutionStatus.PENDING


class ExecutionStepFactory(TenantFactory[ExecutionStep]):
    class Meta:
        model = ExecutionStep

    execution = factory.SubFactory(ExecutionFactory)
    agency = factory.SelfAttribute("execution.agency")
    step_number = factory.Sequence(lambda n: n + 1)
    step_type = StepType.THINK


class TriggerLogFactory(TenantFactory[TriggerLog]):
    class Meta:
        model = TriggerLog

    agent = factory.SubFactory(AgentFactory)
    agency = factory.SelfAttribute("agent.agency")
    site = factory.SelfAttribute("agent.site")
    trigger_type = TriggerType.EVENT
    event_type = "crm.contact.created"
    outcome = TriggerOutcome.INVOKED


class StateTransitionFactory(TenantFactory[StateTransition]):
    class Meta:
        model = StateTransition

    execution = factory.SubFactory(ExecutionFactory)
    agency = factory.SelfAttribute("execution.agency")
    sequence = factory.Sequence(lambda n: n + 1)
    from_state = ExecutionStatus.PENDING
    to_state = ExecutionStatus.RUNNING


class AfterRunWorkFactory(TenantFactory[AfterRunWork]):
    class Meta:
        model = AfterRunWork

    execution = factory.SubFactory(ExecutionFactory, status=ExecutionStatus.COMPLETED)
    agency = factory.SelfAttribute("execution.agency")
    task = "memory.after_run"
    due_at = factory.LazyFunction(timezone.now)


class DecisionPointFactory(TenantFactory[DecisionPoint]):
    class Meta:
        model = DecisionPoint

    execution = factory.SubFactory(ExecutionFactory)
    agency = factory.SelfAttribute("execution.agency")
    decision_type = DecisionType.TOOL_SELECTION
    decision_question = "Which tool should I use?"
    available_options = factory.LazyFunction(lambda: ["crm_get_contact", "crm_search_contacts"])
    chosen_option = "crm_get_contact"
    chosen_option_index = 0
    confidence_score = 0.9


class AgentMessageFactory(TenantFactory[AgentMessage]):
    class Meta:
        model = AgentMessage

    from_execution = factory.SubFactory(ExecutionFactory)
    agency = factory.SelfAttribute("from_execution.agency")
    from_agent = factory.SelfAttribute("from_execution.agent")
    to_agent = factory.SubFactory(
        AgentFactory,
        agency=factory.SelfAttribute("..agency"),
        site=factory.SelfAttribute("..from_execution.site"),
    )
    message_type = MessageType.TASK_DELEGATION
    content = factory.LazyFunction(lambda: {"task": "Qualify the new lead"})
    sent_at = factory.LazyFunction(timezone.now)


class LLMProviderFactory(TenantFactory[LLMProvider]):
    """``api_key="..."`` stores the key encrypted, as the services do."""

    class Meta:
        model = LLMProvider

    agency = factory.SubFactory(AgencyFactory)
    provider_name = ProviderName.OPENAI
    default_model = "gpt-4o-mini"

    @classmethod
    def _create(cls, model_class: type[LLMProvider], *args: Any, **kwargs: Any) -> LLMProvider:
        api_key = kwargs.pop("api_key", None)
        if api_key is not None:
            provider = model_class(**kwargs)
            provider.set_api_key(api_key)
            kwargs = {
                **kwargs,
                "api_key_encrypted": provider.api_key_encrypted,
                "api_key_hint": provider.api_key_hint,
            }
        return super()._create(model_class, *args, **kwargs)
