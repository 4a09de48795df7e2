"""Completeness analysis: a finished run is compared with its agent's expected workflow (the
agent's own, else its type's) by beat's sweep; a run that skipped a required step has it named
(missing, and a skipped_required_step anomaly); the run's page shows the analysis and the agent's
page the analyses per day. Runs through a real Celery worker and the fake provider server."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.test import Client
from django.urls import reverse

from agents.models import Agent, AgentType, Execution, ExecutionStatus
from agents.services import execution_create
from core import tenancy
from core.models import Role
from crm.models import Contact
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import by_turn, text_reply, tool_call_reply
from flow.models import CompletenessAnalysis, ExpectedWorkflow
from flow.tasks import analyse_finished_runs
from tests.factories import MembershipFactory
from tests.processes import Worker, wait_for

pytestmark = pytest.mark.slow
LOOKUP = {"email": "ada@example.com"}


def _workflow(for_agent: Agent, **fields: object) -> ExpectedWorkflow:
    values: dict[str, object] = {
        "name": "Look up, then answer",
        "agent_type": AgentType.SPECIALIST,
        "expected_states": [
            {"state": "pending", "is_required": True},
            {"state": "running", "is_required": True},
            {"state": "completed", "is_required": True},
        ],
        "expected_actions": [
            {"action": "crm_get_contact", "is_required": True},
            {"action": "crm_add_note", "max_count": 2},
        ],
        "expected_transitions": [
            {"from": "pending", "to": "running", "is_required": True},
            {"from": "running", "to": "completed", "is_required": True},
        ],
        "success_conditions": {"status": "completed"},
        **fields,
    }
    with tenancy.agency_context(for_agent.agency_id):
        return ExpectedWorkflow.objects.create(agency_id=for_agent.agency_id, **values)


def _run(agent: Agent) -> Execution:
    with tenancy.agency_context(agent.agency_id):
        execution = execution_create(agent=agent, input="What do we know about Ada?")
    assert execution is not None
    return wait_for(execution)


def _analysis(execution: Execution) -> CompletenessAnalysis:
    with tenancy.agency_context(execution.agency_id):
        return CompletenessAnalysis.objects.get(execution=execution)


@pytest.fixture
def agent(make_agent: Callable[..., Agent]) -> Agent:
    agent = make_agent("openai", agent_type=AgentType.SPECIALIST, allowed_tools=["crm_*"])
    with tenancy.agency_context(agent.agency_id):
        Contact.objects.create(agency_id=agent.agency_id, first_name="Ada", email=LOOKUP["email"])
    return agent


def test_a_run_that_skipped_a_required_step_is_named_in_its_analysis(
    agent: Agent, fake_llm_server: FakeProviderServer, celery_worker: Worker
) -> None:
    _workflow(agent)
    fake_llm_server.set_responder(
        by_turn(text_reply("I think Ada is a customer.")), key=agent.llm_model
    )
    execution = _run(agent)
    assert execution.status == ExecutionStatus.COMPLETED

    # The sweep analyses it, unless the worker's after-run quality scoring (memory.learning)
    # already did: either way there is exactly one analysis, and a second sweep makes none.
    assert analyse_finished_runs() in (0, 1)
    assert analyse_finished_runs() == 0  # once per run

    analysis = _analysis(execution)
    assert analysis.missing_actions == ["crm_get_contact"]
    assert analysis.missing_states == []
    assert analysis.is_complete is False
    # 6 required items (3 states, 1 action, 2 transitions), 5 met.
    assert analysis.completeness_score == pytest.approx(5 / 6, abs=1e-3)
    skipped = {
        "type": "skipped_required_step",
        "description": "The required step crm_get_contact was skipped.",
    }
    assert skipped in analysis.anomalies
    assert analysis.visited_states == ["pending", "running", "completed"]
    assert analysis.expected_transitions_followed == 2


def test_a_run_that_did_every_step_is_complete_and_shows_on_the_run_and_agent_pages(
    agent: Agent,
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
    client: Client,
) -> None:
    mine = _workflow(agent, name="Mine", agent=agent, agent_type="")  # the agent's own wins
    _workflow(agent, expected_actions=[{"action": "crm_delete_*", "is_required": True}])
    fake_llm_server.set_responder(
        by_turn(tool_call_reply("crm_get_contact", LOOKUP), text_reply("Ada is a customer.")),
        key=agent.llm_model,
    )
    execution = _run(agent)
    assert analyse_finished_runs() in (0, 1)  # 0: the after-run quality scoring did it

    analysis = _analysis(execution)
    assert analysis.workflow_id == mine.pk
    assert analysis.is_complete is True
    assert analysis.completeness_score == 1.0
    assert analysis.performed_actions == ["crm_get_contact"]
    assert analysis.anomalies == []

    with tenancy.agency_context(agent.agency_id):
        staff = MembershipFactory.create(agency=agent.agency, role=Role.STAFF).user
    client.force_login(staff)
    page = client.get(reverse("admin:agents_execution_change", args=[execution.pk]))
    assert page.status_code == 200
    text = page.content.decode()
    assert "100 % complete" in text
    assert "against <em>Mine</em>" in text
    agent_page = client.get(reverse("admin:agents_agent_change", args=[agent.pk])).content.decode()
    assert "Flow, teams and learning" in agent_page
    assert "Expected workflow: <em>Mine</em>" in agent_page
    assert "100 %" in agent_page  # the day's mean completeness
