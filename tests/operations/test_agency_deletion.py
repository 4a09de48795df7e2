"""Deleting an agency deletes all its rows in every table: each model with a foreign key to
core.Agency is listed from the app registry, the fixture must hold a row of each (a model added
later without one fails here by name), and after the deletion none is left, while another
agency's rows are untouched."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from agents.models import Agent, ExecutionStatus
from agents.schedules import agent_schedule_sync, periodic_task_name
from agents.services.versions import agent_version_record
from core import tenancy
from core.api.idempotency import IdempotencyRecord
from core.api_keys.services import api_key_create
from core.models import Agency, Role, User
from core.selectors import agency_keys
from core.services import agency_delete
from evals.models import Canary, DeployGate, ExperimentResult
from members.services import invitation_create
from memory.embeddings import DIMENSIONS
from tests.admin.helpers import admin_url
from tests.agents.factories import (
    AfterRunWorkFactory,
    AgentFactory,
    AgentGoalFactory,
    AgentMessageFactory,
    AgentTemplateFactory,
    DecisionPointFactory,
    ExecutionFactory,
    ExecutionStepFactory,
    LLMProviderFactory,
    StateTransitionFactory,
    TriggerLogFactory,
)
from tests.approvals.factories import ApprovalFactory, QuestionFactory, RiskRuleFactory
from tests.core.factories import EventFactory
from tests.crm.factories import (
    CalendarEventFactory,
    ContactFactory,
    EmailMessageFactory,
    FormSubmissionFactory,
    NoteFactory,
    TaskFactory,
)
from tests.datasets.factories import (
    AnalysisDatasetFactory,
    DatasetChartFactory,
    DatasetResultFactory,
)
from tests.evals.factories import ExperimentFactory, TestCaseFactory
from tests.factories import AgencyFactory, MembershipFactory, SiteFactory
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
    PatternUseFactory,
    RunQualityFactory,
)
from tests.sso.helpers import sso_rows
from tests.tools.factories import McpServerFactory, ToolCallFactory, ToolFactory
from tests.usage.factories import (
    BudgetFactory,
    ModelPriceFactory,
    UsageDailyFactory,
    UsagePeriodFactory,
)
from tests.webhooks.factories import WebhookDeliveryFactory
from usage.models import EvaluationBudget
from webhooks.outbound.models import Delivery, DeliveryAttempt, Subscription

pytestmark = pytest.mark.django_db


def counts(agency_id: uuid.UUID) -> dict[str, int]:
    with tenancy.platform_context():
        return {
            model._meta.label: model._default_manager.filter(**{name: agency_id}).count()
            for model, name in agency_keys()
        }


def populate(agency: Agency) -> Agent:
    """A row of every agency-owned model, wired together as the platform wires them (a run's
    children point at the run, the run at the agent, ...), so that the cascades are exercised
    along every path and not only from the agency. Returns the scheduled agent."""
    site = SiteFactory.create(agency=agency)
    MembershipFactory.create(agency=agency)
    with tenancy.agency_context(agency.id):
        api_key_create(agency_id=agency.id, name="CI")
    sso_rows(agency)  # its single sign-on provider and a member's identity
    template = AgentTemplateFactory.create(agency=agency)
    agent = AgentFactory.create(
        agency=agency, site=site, template=template, trigger_schedule="0 9 * * 1"
    )
    with tenancy.agency_context(agency.id):
        agent_schedule_sync(agent)
        first = agent_version_record(agent=agent, user_id=None)
        agent.system_prompt = "Edited."
        agent.save(update_fields=["system_prompt"])
        second = agent_version_record(agent=agent, user_id=None, restored_from=first)
    AgentGoalFactory.create(agent=agent)
    LLMProviderFactory.create(agency=agency, api_key="sk-test-0123456789")
    event = EventFactory.create(agency=agency, site=site)
    parent = ExecutionFactory.create(
        agent=agent, status=ExecutionStatus.COMPLETED, trigger_event=event, agent_version=first
    )
    run = ExecutionFactory.create(
        agent=agent, parent=parent, status=ExecutionStatus.WAITING_APPROVAL
    )
    TriggerLogFactory.create(agent=agent, event=event, execution=run)
    step = ExecutionStepFactory.create(execution=run)
    StateTransitionFactory.create(execution=run)
    AfterRunWorkFactory.create(execution=parent)
    DecisionPointFactory.create(execution=run, step=step)
    AgentMessageFactory.create(from_execution=parent, to_execution=run)
    tool = ToolFactory.create(agency=agency)
    call = ToolCallFactory.create(execution=run, tool=tool, step=step)
    RiskRuleFactory.create(agency=agency)
    ApprovalFactory.create(tool_call=call)
    QuestionFactory.create(tool_call__execution=run)
    memory = MemoryFactory.create(agent=agent, execution=run, embedding=[0.125] * DIMENSIONS)
    MemoryChangeFactory.create(agent=agent, memory=memory, memory_ids=[memory.id])
    EpisodeFactory.create(agent=agent, execution=parent)
    ConversationFactory.create(agent=agent)
    UsageDailyFactory.create(agent=agent)
    UsagePeriodFactory.create(agency=agency)
    BudgetFactory.create(agency=agency)
    ModelPriceFactory.create(agency=agency)
    contact = ContactFactory.create(agency=agency, site=site)
    NoteFactory.create(contact=contact)
    TaskFactory.create(contact=contact)
    CalendarEventFactory.create(contact=contact)
    EmailMessageFactory.create(contact=contact, execution=run)
    FormSubmissionFactory.create(agency=agency, site=site, contact=contact)
    WebhookDeliveryFactory.create(webhook__agent=agent, execution=run)
    # Issue 31: an outbound webhook subscription, a delivery of it and its attempt.
    with tenancy.agency_context(agency.id):
        subscription = Subscription.objects.create(
            agency=agency,
            name="Outbound",
            url="https://hooks.example.com/in",
            event_types=["ai.*"],
            secret_encrypted="whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        )
        delivery = Delivery.objects.create(
            agency=agency,
            subscription=subscription,
            event_id=uuid.uuid4(),
            event_type="ai.execution.completed",
            payload={},
        )
        DeliveryAttempt.objects.create(agency=agency, delivery=delivery, number=1, latency_ms=5)
    # Issues 18 and 19: idempotency keys, invitations, MCP servers, flow analysis, learning.
    with tenancy.agency_context(agency.id):
        IdempotencyRecord.objects.create(
            agency=agency,
            credential="key:ci",
            key="retry-1",
            request_hash="0" * 64,
            response_status=202,
            response_body="{}",
            expires_at=timezone.now() + datetime.timedelta(hours=1),
        )
        invitation_create(
            agency=agency, email="new@example.com", role=Role.VIEWER, username="", invited_by=None
        )
    McpServerFactory.create(agency=agency)
    ExpectedWorkflowFactory.create(agency=agency)
    CompletenessAnalysisFactory.create(execution=parent)
    LoopDetectionFactory.create(execution=run)
    StuckRunFactory.create(execution=run)
    RunQualityFactory.create(execution=parent)
    pattern = LearnedPatternFactory.create(agent=agent)
    PatternUseFactory.create(pattern=pattern, execution=run)
    InvestigationFactory.create(execution=run)
    # Issue 28: evaluations (a dataset of the agent, a case, an experiment and its result).
    case = TestCaseFactory.create(
        version__dataset__agency=agency,
        version__dataset__agent=agent,
        source_execution_id=parent.id,
    )
    experiment = ExperimentFactory.create(
        agent=agent, dataset_version=case.version, agent_version=first
    )
    with tenancy.agency_context(agency.id):
        ExperimentResult.objects.create(
            agency=agency, experiment=experiment, case=case, execution=run
        )
        # Its deploy gate, a canary of its first version, the judge's budget of the day.
        DeployGate.objects.create(agency=agency, agent=agent, dataset=case.version.dataset)
        assert first is not None
        assert second is not None
        Canary.objects.create(agency=agency, agent=agent, candidate=first, stable=second)
        EvaluationBudget.objects.create(agency=agency)
    # Issue 30: a dataset (its bytes in its row), a table result and a chart of the run.
    AnalysisDatasetFactory.create(agency=agency, data=b"PAR1")
    DatasetResultFactory.create(execution=run)
    DatasetChartFactory.create(execution=run)
    return agent


def assert_no_dangling_reference() -> None:
    """The foreign keys are deferred (checked at COMMIT, which a test rolled back never
    reaches): check them now, so that a row left pointing at a deleted one fails here."""
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def assert_populated(agency_id: uuid.UUID) -> dict[str, int]:
    before = counts(agency_id)
    missing = sorted(label for label, n in before.items() if n == 0)
    assert not missing, (
        f"no row of {', '.join(missing)} in the fixture: add one to populate() so that "
        "deleting an agency is shown to delete it too"
    )
    return before


def test_every_table_with_an_agency_column_has_a_foreign_key_to_the_agency() -> None:
    """A table with an agency_id but no foreign key (raw SQL, ``db_constraint=False``) would
    keep its rows when the agency goes; the database must know every such reference."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.table_name,
                   EXISTS (
                       SELECT 1 FROM pg_constraint k
                       JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = k.conkey[1]
                       WHERE k.contype = 'f'
                         AND k.conrelid = (quote_ident(c.table_name))::regclass
                         AND k.confrelid = 'core_agency'::regclass
                         AND cardinality(k.conkey) = 1
                         AND a.attname = 'agency_id'
                   )
            FROM information_schema.columns c
            JOIN information_schema.tables t USING (table_schema, table_name)
            WHERE c.table_schema = current_schema() AND c.column_name = 'agency_id'
              AND t.table_type = 'BASE TABLE'
            """
        )
        tables = dict(cursor.fetchall())
    listed = {model._meta.db_table for model, _ in agency_keys()}
    assert set(tables) == listed
    assert sorted(name for name, has_key in tables.items() if not has_key) == []


def _delete_in_admin(agency: Agency, client: Client) -> None:
    url = admin_url(Agency, "delete", agency.pk)
    page = client.get(url)
    assert page.status_code == 200
    # What goes with it, counted by kind (not listed row by row).
    assert b"Execution steps: 1" in page.content
    assert b"Agencies: 1" in page.content
    response = client.post(url, {"post": "yes"})
    assert response.status_code == 302, response.content[:2000]


@pytest.mark.parametrize(
    "delete",
    [
        pytest.param(lambda agency, _client: agency_delete(agency=agency), id="service"),
        pytest.param(_delete_in_admin, id="admin"),
    ],
)
def test_deleting_an_agency_deletes_its_rows_in_every_table(
    delete: Callable[[Agency, Client], None], django_user_model: type[User]
) -> None:
    doomed, kept = AgencyFactory.create(), AgencyFactory.create()
    doomed_id = doomed.id  # delete() clears the instance's pk
    scheduled = populate(doomed)
    kept_agent = populate(kept)
    assert_populated(doomed_id)
    kept_before = assert_populated(kept.id)
    client = Client()
    client.force_login(django_user_model.objects.create_superuser("root", "root@x.test", "pw"))

    delete(doomed, client)

    left = {label: n for label, n in counts(doomed_id).items() if n}
    assert left == {}
    assert_no_dangling_reference()
    with tenancy.platform_context():
        assert not Agency.objects.filter(pk=doomed_id).exists()
    assert counts(kept.id) == kept_before
    # Beat entries of its agents name no agency column, and go too; the other's stay.
    assert not PeriodicTask.objects.filter(name=periodic_task_name(scheduled)).exists()
    assert PeriodicTask.objects.filter(name=periodic_task_name(kept_agent)).exists()


def test_deleting_an_agency_in_bulk_from_the_changelist_deletes_its_rows(
    django_user_model: type[User],
) -> None:
    doomed, kept = AgencyFactory.create(), AgencyFactory.create()
    scheduled = populate(doomed)
    populate(kept)
    kept_before = assert_populated(kept.id)
    client = Client()
    client.force_login(django_user_model.objects.create_superuser("root", "root@x.test", "pw"))

    response = client.post(
        admin_url(Agency, "changelist"),
        {"action": "delete_selected", "_selected_action": [str(doomed.pk)], "post": "yes"},
    )

    assert response.status_code == 302, response.content[:2000]
    assert {label: n for label, n in counts(doomed.id).items() if n} == {}
    assert_no_dangling_reference()
    assert counts(kept.id) == kept_before
    assert not PeriodicTask.objects.filter(name=periodic_task_name(scheduled)).exists()
