"""Agents app models: uniqueness, templates, trace integrity and isolation in the database."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction

from agents.models import (
    Agent,
    AgentTemplate,
    AgentType,
    Execution,
    ExecutionStatus,
    SkipReason,
    TriggerLog,
    TriggerOutcome,
)
from core import tenancy
from tests.agents.factories import (
    AgentFactory,
    AgentGoalFactory,
    AgentTemplateFactory,
    ExecutionFactory,
    ExecutionStepFactory,
    TriggerLogFactory,
)
from tests.factories import AgencyFactory, SiteFactory

pytestmark = pytest.mark.django_db


def test_agent_slug_is_unique_per_site() -> None:
    agent = AgentFactory.create(slug="sdr")
    other_site = SiteFactory.create(agency=agent.agency)
    # The same slug on another site of the agency is fine ...
    AgentFactory.create(agency=agent.agency, site=other_site, slug="sdr")
    # ... on the same site it is refused by the database.
    with pytest.raises(IntegrityError, match="agents_agent_unique_slug"), transaction.atomic():
        AgentFactory.create(agency=agent.agency, site=agent.site, slug="sdr")


def test_agent_clean_refuses_a_site_of_another_agency() -> None:
    agent = AgentFactory.create()
    foreign_site = SiteFactory.create()
    agent.site = foreign_site
    # Seen by the platform, or hidden by row-level security inside the agent's tenant.
    for context in (tenancy.platform_context(), tenancy.agency_context(agent.agency_id)):
        with context, pytest.raises(ValidationError, match="another agency"):
            agent.full_clean()
    agent.site = SiteFactory.create(agency=agent.agency)
    with tenancy.agency_context(agent.agency_id):
        agent.full_clean()


def _checked_now() -> None:
    """Run the deferred foreign-key checks now (the test's transaction never commits)."""
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def test_an_agent_on_a_site_of_another_agency_is_refused_by_the_database() -> None:
    """However it got past the forms: an UPDATE or an INSERT inside the agent's own tenant."""
    agent = AgentFactory.create()
    foreign_site = SiteFactory.create()

    def move_to_the_foreign_site() -> None:
        with tenancy.agency_context(agent.agency_id):
            Agent.objects.filter(pk=agent.pk).update(site_id=foreign_site.pk)
            _checked_now()

    def create_on_the_foreign_site() -> None:
        with tenancy.agency_context(agent.agency_id):
            Agent.objects.create(
                agency_id=agent.agency_id,
                site=foreign_site,
                name="X",
                slug="x",
                agent_type="assistant",
            )
            _checked_now()

    for write in (move_to_the_foreign_site, create_on_the_foreign_site):
        with pytest.raises(IntegrityError, match="agents_agent_site_same_agency"):
            write()
    with tenancy.agency_context(agent.agency_id):
        assert list(Agent.objects.values_list("site_id", flat=True)) == [agent.site_id]


@pytest.mark.parametrize("reference", ["agent", "site"])
def test_an_execution_of_another_agencys_agent_or_site_is_refused_by_the_database(
    reference: str,
) -> None:
    mine, theirs = AgentFactory.create(), AgentFactory.create()
    foreign = {"agent": theirs, "site": theirs.site}[reference]
    fields = {"agent": mine, "site": mine.site, reference: foreign}

    def create() -> None:
        with tenancy.agency_context(mine.agency_id):
            Execution.objects.create(agency_id=mine.agency_id, trigger_type="manual", **fields)
            _checked_now()

    with pytest.raises(IntegrityError, match=f"agents_execution_{reference}_same_agency"):
        create()
    with tenancy.agency_context(mine.agency_id):
        assert not Execution.objects.exists()


def test_deleting_an_agent_with_executions_still_works_under_those_keys() -> None:
    execution = ExecutionFactory.create()
    with tenancy.agency_context(execution.agency_id):
        Agent.objects.get(pk=execution.agent_id).delete()  # Django cascades to the executions
        _checked_now()
        assert not Execution.objects.filter(pk=execution.pk).exists()


def test_factories_give_children_their_parents_agency() -> None:
    goal = AgentGoalFactory.create()
    step = ExecutionStepFactory.create()
    assert goal.agency_id == goal.agent.agency_id
    assert step.agency_id == step.execution.agency_id == step.execution.agent.agency_id
    assert step.execution.site_id == step.execution.agent.site_id


def test_five_agent_type_templates_are_seeded_for_every_agency() -> None:
    a, b = AgencyFactory.create(), AgencyFactory.create()
    for agency in (a, b):
        with tenancy.agency_context(agency.id):
            templates = {t.agent_type: t for t in AgentTemplate.objects.filter(is_system=True)}
        assert set(templates) == set(AgentType.values)
    specialist = templates[AgentType.SPECIALIST]
    assert specialist.name == "SDR Agent"
    assert specialist.domain == "sales"
    assert specialist.trigger_events == ["crm.contact.created", "form.submitted"]
    assert specialist.trigger_schedule == "0 * * * *"
    assert "email_send" in specialist.allowed_tools
    assert "Score the lead based on ICP fit" in specialist.system_prompt
    assert [g["name"] for g in specialist.goals] == [
        "Lead Qualification",
        "Response Rate",
        "Meeting Bookings",
    ]
    assert (
        templates[AgentType.ASSISTANT].constraints[0] == "Never send emails without user approval"
    )
    assert templates[AgentType.ORCHESTRATOR].extra_config["managed_agents"][0] == (
        "onboarding_specialist"
    )
    assert templates[AgentType.GUARDIAN].allowed_tools == ["data_query", "notify_user"]
    assert all(t.agency_id is None and t.system_prompt for t in templates.values())


def test_an_agencys_own_template_is_invisible_to_other_agencies() -> None:
    own = AgentTemplateFactory.create(slug="my-sdr")
    assert own.agency_id is not None
    other = AgencyFactory.create()
    with tenancy.agency_context(other.id):
        assert not AgentTemplate.objects.filter(pk=own.pk).exists()
        assert AgentTemplate.objects.filter(is_system=True).count() >= 5
    with tenancy.agency_context(own.agency_id):
        assert AgentTemplate.objects.filter(pk=own.pk).exists()


def test_agency_cannot_change_platform_templates() -> None:
    agency = AgencyFactory.create()
    with tenancy.agency_context(agency.id), connection.cursor() as cursor:
        cursor.execute("UPDATE agents_agenttemplate SET name = 'hijacked' WHERE agency_id IS NULL")
        assert cursor.rowcount == 0


def test_step_numbers_are_unique_within_an_execution() -> None:
    step = ExecutionStepFactory.create(step_number=1)
    ExecutionStepFactory.create(step_number=1)  # another execution: fine
    with (
        pytest.raises(IntegrityError, match="agents_executionstep_unique_number"),
        transaction.atomic(),
    ):
        ExecutionStepFactory.create(execution=step.execution, step_number=1)


def test_a_skipped_trigger_must_say_why() -> None:
    log = TriggerLogFactory.create(
        outcome=TriggerOutcome.SKIPPED, skip_reason=SkipReason.BUDGET_EXCEEDED
    )
    with tenancy.agency_context(log.agency_id):
        with pytest.raises(IntegrityError, match="skip_reason_valid"), transaction.atomic():
            TriggerLog.objects.filter(pk=log.pk).update(skip_reason="")
        # ... and an invocation carries no skip reason.
        with pytest.raises(IntegrityError, match="skip_reason_valid"), transaction.atomic():
            TriggerLog.objects.filter(pk=log.pk).update(outcome=TriggerOutcome.INVOKED)


def test_execution_statuses_are_exactly_the_runtime_states() -> None:
    assert ExecutionStatus.values == [
        "pending",
        "running",
        "waiting_approval",
        "waiting_input",
        "waiting_agent",
        "completed",
        "failed",
        "cancelled",
        "timed_out",
    ]


def test_agents_and_executions_are_invisible_to_other_agencies() -> None:
    execution = ExecutionFactory.create()
    other = AgencyFactory.create()
    with tenancy.agency_context(other.id):
        assert not Agent.objects.filter(pk=execution.agent_id).exists()
        assert not Execution.objects.filter(pk=execution.pk).exists()
    with tenancy.agency_context(execution.agency_id):
        assert Execution.objects.get(pk=execution.pk).agent_id == execution.agent_id


def test_seed_indexes_exist() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes"
            " WHERE tablename IN ('agents_agent', 'agents_triggerlog', 'agents_execution')"
        )
        indexes = dict(cursor.fetchall())
    assert "USING gin (trigger_events)" in indexes["agents_agent_triggers_gin"]
    assert "USING gin (payload)" in indexes["agents_triggerlog_payload_gin"]
    assert "WHERE is_active" in indexes["agents_agent_active_idx"]
    assert "(status)" in indexes["agents_execution_status_idx"]  # also the reaper's


def test_a_step_updates_the_execution_row_without_touching_its_indexes() -> None:
    """No index covers a column a step changes (lease, counters), and pages keep room, so the
    step's UPDATE is a HOT update (migration agents 0005)."""
    step_columns = {
        "current_step", "sequence", "lease_expires_at", "tokens_input", "tokens_output",
        "tokens_total", "cost_usd", "llm_call_count", "tool_call_count", "updated_at",
    }  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a"
            " ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)"
            " WHERE i.indrelid = 'agents_execution'::regclass"
        )
        indexed = {row[0] for row in cursor.fetchall()}
        cursor.execute("SELECT reloptions FROM pg_class WHERE oid = 'agents_execution'::regclass")
        options = cursor.fetchone()[0]
    assert not indexed & step_columns
    assert "fillfactor=80" in options


def test_the_config_snapshot_is_stored_out_of_the_row_a_step_rewrites() -> None:
    """A step's UPDATE writes a new version of the execution row; the snapshot (prompt, tool
    schemas) lives out of line so that only a pointer to it is copied (migration agents 0006)."""
    from tests.agents.factories import ExecutionFactory

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT attname, attstorage FROM pg_attribute WHERE attrelid ="
            " 'agents_execution'::regclass AND attname IN ('config_snapshot', 'input', 'status')"
        )
        storage = dict(cursor.fetchall())
        cursor.execute("SELECT reloptions FROM pg_class WHERE oid = 'agents_execution'::regclass")
        options = cursor.fetchone()[0]
    assert storage == {"config_snapshot": "e", "input": "e", "status": "x"}  # e: out of line
    assert "toast_tuple_target=128" in options

    snapshot = {"system_prompt": "You are careful. " * 60, "tools": [{"n": i} for i in range(40)]}
    execution = ExecutionFactory.create(config_snapshot=snapshot)
    with tenancy.agency_context(execution.agency_id):
        Execution.objects.filter(pk=execution.pk).update(current_step=5, lease_owner="w")
        assert Execution.objects.get(pk=execution.pk).config_snapshot == snapshot
