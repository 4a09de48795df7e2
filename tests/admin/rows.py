"""One row of every agency-owned model registered in the admin, for a given agency."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agents.models import (
    Agent,
    AgentMessage,
    AgentTemplate,
    DecisionPoint,
    Execution,
    ExecutionStep,
    LLMProvider,
    StateTransition,
    TriggerLog,
)
from approvals.models import Approval, RiskRule
from core import tenancy
from core.models import Agency, Event, Membership, Site
from crm.models import CalendarEvent, Contact, EmailMessage, FormSubmission, Note, Task
from datasets.models import Dataset as AnalysisDataset
from datasets.models import DatasetResult
from evals.models import Canary, Dataset, DatasetVersion, DeployGate, Experiment, TestCase
from flow.models import CompletenessAnalysis, ExpectedWorkflow, LoopDetection, StuckRun
from memory.embeddings import DIMENSIONS
from memory.learning.models import Investigation, LearnedPattern, RunQuality
from memory.models import Conversation, Episode, Memory, MemoryChange
from tests.agents.factories import (
    AgentFactory,
    AgentMessageFactory,
    AgentTemplateFactory,
    DecisionPointFactory,
    ExecutionFactory,
    ExecutionStepFactory,
    LLMProviderFactory,
    StateTransitionFactory,
    TriggerLogFactory,
)
from tests.approvals.factories import ApprovalFactory, RiskRuleFactory
from tests.core.factories import EventFactory
from tests.crm.factories import (
    CalendarEventFactory,
    ContactFactory,
    EmailMessageFactory,
    FormSubmissionFactory,
    NoteFactory,
    TaskFactory,
)
from tests.datasets.factories import AnalysisDatasetFactory, DatasetResultFactory
from tests.evals.canary_factories import canary_row
from tests.evals.factories import (
    DatasetFactory,
    DatasetVersionFactory,
    ExperimentFactory,
    TestCaseFactory,
)
from tests.factories import MembershipFactory, SiteFactory
from tests.flow.factories import (
    CompletenessAnalysisFactory,
    ExpectedWorkflowFactory,
    LoopDetectionFactory,
    StuckRunFactory,
)
from tests.memory.factories import (
    ConversationFactory,
    EpisodeFactory,
    MemoryChangeFactory,
    MemoryFactory,
)
from tests.memory.learning.factories import (
    InvestigationFactory,
    LearnedPatternFactory,
    RunQualityFactory,
)
from tests.tools.factories import McpServerFactory, ToolCallFactory, ToolFactory
from tests.usage.factories import (
    BudgetFactory,
    EvaluationBudgetFactory,
    ModelPriceFactory,
    UsageDailyFactory,
    UsagePeriodFactory,
)
from tests.webhooks.factories import OutboundDeliveryFactory, SubscriptionFactory, WebhookFactory
from tools.models import McpServer, Tool, ToolCall
from usage.models import Budget, EvaluationBudget, ModelPrice, UsageDaily, UsagePeriod
from webhooks.models import Delivery as OutboundDelivery
from webhooks.models import Subscription, Webhook

RAW_API_KEY = "sk-test-NEVER-SHOWN-0123456789abcd"


def _agent(agency: Agency) -> Agent:
    return AgentFactory.create(agency=agency)


def _execution(agency: Agency) -> Execution:
    return ExecutionFactory.create(agent=_agent(agency))


def _gate(agency: Agency) -> DeployGate:
    agent, dataset = _agent(agency), DatasetFactory.create(agency=agency)
    with tenancy.agency_context(agency.pk):
        return DeployGate.objects.create(agency=agency, agent=agent, dataset=dataset)


def _case(agency: Agency) -> TestCase:
    """A case of its dataset's current version (an older version's case reads only)."""
    case = TestCaseFactory.create(version__dataset__agency=agency)
    dataset = case.version.dataset
    with tenancy.agency_context(agency.pk):
        Dataset.objects.filter(pk=dataset.pk).update(current_version=case.version)
    return case


def _contact(agency: Agency) -> Contact:
    return ContactFactory.create(agency=agency)


ROWS: dict[type[Any], Callable[[Agency], Any]] = {
    Site: lambda a: SiteFactory.create(agency=a),
    Membership: lambda a: MembershipFactory.create(agency=a),
    Event: lambda a: EventFactory.create(agency=a),
    Agent: _agent,
    AgentTemplate: lambda a: AgentTemplateFactory.create(agency=a),
    Execution: _execution,
    ExecutionStep: lambda a: ExecutionStepFactory.create(execution=_execution(a)),
    TriggerLog: lambda a: TriggerLogFactory.create(agent=_agent(a)),
    StateTransition: lambda a: StateTransitionFactory.create(execution=_execution(a)),
    DecisionPoint: lambda a: DecisionPointFactory.create(execution=_execution(a)),
    AgentMessage: lambda a: AgentMessageFactory.create(from_execution=_execution(a)),
    LLMProvider: lambda a: LLMProviderFactory.create(agency=a, api_key=RAW_API_KEY),
    Tool: lambda a: ToolFactory.create(agency=a),
    McpServer: lambda a: McpServerFactory.create(agency=a),
    ToolCall: lambda a: ToolCallFactory.create(execution=_execution(a)),
    Memory: lambda a: MemoryFactory.create(agent=_agent(a), embedding=[0.125] * DIMENSIONS),
    MemoryChange: lambda a: MemoryChangeFactory.create(agent=_agent(a)),
    Episode: lambda a: EpisodeFactory.create(agent=_agent(a)),
    Conversation: lambda a: ConversationFactory.create(agent=_agent(a)),
    Approval: lambda a: ApprovalFactory.create(
        tool_call=ToolCallFactory.create(execution=_execution(a))
    ),
    RiskRule: lambda a: RiskRuleFactory.create(agency=a),
    UsageDaily: lambda a: UsageDailyFactory.create(agent=_agent(a)),
    UsagePeriod: lambda a: UsagePeriodFactory.create(agency=a),
    Budget: lambda a: BudgetFactory.create(agency=a),
    EvaluationBudget: lambda a: EvaluationBudgetFactory.create(agency=a),
    ModelPrice: lambda a: ModelPriceFactory.create(agency=a),
    Contact: _contact,
    Note: lambda a: NoteFactory.create(contact=_contact(a)),
    Task: lambda a: TaskFactory.create(contact=_contact(a)),
    CalendarEvent: lambda a: CalendarEventFactory.create(contact=_contact(a)),
    EmailMessage: lambda a: EmailMessageFactory.create(contact=_contact(a)),
    FormSubmission: lambda a: FormSubmissionFactory.create(agency=a),
    Webhook: lambda a: WebhookFactory.create(agent=_agent(a)),
    Subscription: lambda a: SubscriptionFactory.create(agency=a),
    OutboundDelivery: lambda a: OutboundDeliveryFactory.create(subscription__agency=a),
    ExpectedWorkflow: lambda a: ExpectedWorkflowFactory.create(agency=a),
    CompletenessAnalysis: lambda a: CompletenessAnalysisFactory.create(execution=_execution(a)),
    LoopDetection: lambda a: LoopDetectionFactory.create(execution=_execution(a)),
    StuckRun: lambda a: StuckRunFactory.create(execution=_execution(a)),
    LearnedPattern: lambda a: LearnedPatternFactory.create(agent=_agent(a)),
    RunQuality: lambda a: RunQualityFactory.create(execution=_execution(a)),
    Investigation: lambda a: InvestigationFactory.create(execution=_execution(a)),
    Dataset: lambda a: DatasetFactory.create(agency=a),
    DatasetVersion: lambda a: DatasetVersionFactory.create(dataset__agency=a),
    TestCase: _case,
    Experiment: lambda a: ExperimentFactory.create(dataset_version__dataset__agency=a),
    DeployGate: _gate,
    Canary: canary_row,
    AnalysisDataset: lambda a: AnalysisDatasetFactory.create(agency=a),
    DatasetResult: lambda a: DatasetResultFactory.create(execution=_execution(a)),
}
