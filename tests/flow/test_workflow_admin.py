"""Expected workflows in the admin: a definition that does not fit its JSON Schema (or names a
state twice, a transition between states it does not expect, min above max, no agent type or
agent) is refused with the reason and nothing is saved; a good one is saved for the member's
agency. The agent editor's "Flow, teams and learning" tab saves issue 19's settings."""

from __future__ import annotations

import html
import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from agents.models import Agent, LoopAction, StuckAction
from core import tenancy
from core.models import Agency, Role, User
from flow.models import ExpectedWorkflow
from tests.admin.test_agent_admin import agent_form
from tests.agents.factories import AgentFactory
from tests.factories import AgencyFactory, MembershipFactory, SiteFactory

pytestmark = pytest.mark.django_db
ADD = reverse("admin:flow_expectedworkflow_add")


@pytest.fixture
def agency() -> Agency:
    return AgencyFactory.create()


@pytest.fixture
def staff(agency: Agency) -> User:
    return MembershipFactory.create(agency=agency, role=Role.STAFF).user


@pytest.fixture
def client(staff: User) -> Client:
    client = Client()
    client.force_login(staff)
    return client


def _form(**overrides: Any) -> dict[str, str]:
    data: dict[str, Any] = {
        "name": "Support flow",
        "category": "support",
        "description": "",
        "agent_type": "specialist",
        "agent": "",
        "is_active": "on",
        "expected_states": [
            {"state": "running", "is_required": True, "max_duration_seconds": 300},
            {"state": "completed", "is_required": True},
        ],
        "expected_actions": [{"action": "crm_*", "is_required": True, "min_count": 1}],
        "expected_transitions": [{"from": "running", "to": "completed", "is_required": True}],
        "max_duration_ms": "",
        "max_cost_usd": "",
        "max_llm_calls": "",
        "success_conditions": {"status": "completed"},
        **overrides,
    }
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in data.items()}


def _saved(agency: Agency) -> list[ExpectedWorkflow]:
    with tenancy.agency_context(agency.id):
        return list(ExpectedWorkflow.objects.all())


def _errors(response: Any) -> str:
    assert response.status_code == 200  # the form again, not a redirect
    return html.unescape(response.content.decode())


def test_a_good_definition_is_saved_for_the_members_agency(client: Client, agency: Agency) -> None:
    response = client.post(ADD, _form())

    assert response.status_code == 302, _errors(response)[-3000:]
    [workflow] = _saved(agency)
    assert workflow.agency_id == agency.id
    assert workflow.expected_states[0] == {
        "state": "running",
        "is_required": True,
        "max_duration_seconds": 300,
    }


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"expected_states": [{"state": "thinking"}]},
            "Not a valid definition: [0].state: 'thinking' is not one of",
        ),
        (
            {"expected_states": [{"state": "running", "is_required": "yes"}]},
            "Not a valid definition: [0].is_required: 'yes' is not of type 'boolean'",
        ),
        (
            {"expected_actions": [{"tool": "crm_get_contact"}]},
            "Not a valid definition: [0]: 'action' is a required property",
        ),
        (
            {"expected_actions": {"action": "crm_get_contact"}},
            "Not a valid definition: value: {'action': 'crm_get_contact'} is not of type 'array'",
        ),
        (
            {"expected_states": [{"state": "running"}, {"state": "running"}]},
            "Each state may appear once.",
        ),
        (
            {"expected_actions": [{"action": "crm_*", "min_count": 3, "max_count": 1}]},
            "crm_*: min_count (3) is more than max_count (1).",
        ),
        (
            {"expected_transitions": [{"from": "running", "to": "failed"}]},
            "running -> failed: failed is not one of the expected states.",
        ),
        ({"agent_type": ""}, "Choose an agent type, or an agent, that this workflow is for."),
        ({"expected_states": "[{"}, "Enter a valid JSON."),
    ],
)
def test_a_bad_definition_is_refused_with_the_reason_and_nothing_is_saved(
    client: Client, agency: Agency, overrides: dict[str, Any], message: str
) -> None:
    response = client.post(ADD, _form(**overrides))

    assert message in _errors(response)
    assert _saved(agency) == []


def test_another_agencys_agent_cannot_be_picked(client: Client, agency: Agency) -> None:
    other = AgentFactory.create(agency=AgencyFactory.create())

    response = client.post(ADD, _form(agent=str(other.pk), agent_type=""))

    assert "Select a valid choice" in _errors(response)
    assert _saved(agency) == []


def test_the_agent_editor_saves_the_flow_teams_and_learning_settings(
    client: Client, agency: Agency
) -> None:
    site = SiteFactory.create(agency=agency)
    agent = AgentFactory.create(agency=agency, site=site, slug="lead-qualifier")
    url = reverse("admin:agents_agent_change", args=[agent.pk])
    assert "Flow, teams and learning" in client.get(url).content.decode()
    form = agent_form(
        site,
        loop_threshold="5",
        loop_action=LoopAction.ASK_HUMAN,
        stuck_after_seconds="120",
        stuck_action=StuckAction.CANCEL,
        delegate_agents="research-*,writer",
        denied_delegate_agents="research-secret",
        quality_threshold="0.90",
        investigation_max_steps="4",
    )
    form.pop("learning_enabled")  # unticked

    response = client.post(url, form)

    assert response.status_code == 302, _errors(response)[-3000:]
    with tenancy.agency_context(agency.id):
        agent = Agent.objects.get(pk=agent.pk)
    assert agent.loop_threshold == 5
    assert agent.loop_action == LoopAction.ASK_HUMAN
    assert agent.stuck_after_seconds == 120
    assert agent.stuck_action == StuckAction.CANCEL
    assert agent.delegate_agents == ["research-*", "writer"]
    assert agent.denied_delegate_agents == ["research-secret"]
    assert agent.learning_enabled is False
    assert str(agent.quality_threshold) == "0.90"
    assert agent.investigation_max_steps == 4


def test_a_loop_threshold_over_100_is_refused(client: Client, agency: Agency) -> None:
    site = SiteFactory.create(agency=agency)
    agent = AgentFactory.create(agency=agency, site=site, slug="lead-qualifier")
    url = reverse("admin:agents_agent_change", args=[agent.pk])

    response = client.post(url, agent_form(site, loop_threshold="101"))

    assert "Ensure this value is less than or equal to 100." in _errors(response)
    with tenancy.agency_context(agency.id):
        assert Agent.objects.get(pk=agent.pk).loop_threshold == 3


def test_the_add_form_shows_empty_boxes_with_examples_and_help_in_words(client: Client) -> None:
    page = html.unescape(client.get(ADD).content.decode())

    for name in ("expected_states", "expected_actions", "expected_transitions"):
        box = page.split(f'name="{name}"', 1)[1].split("</textarea>", 1)[0]
        assert box.split(">", 1)[1].strip() == "", name  # no "[]" typed in
        assert 'placeholder="e.g. [{"' in box, name  # an example of what goes in
    box = page.split('name="success_conditions"', 1)[1].split("</textarea>", 1)[0]
    assert box.split(">", 1)[1].strip() == ""  # no "{}"
    assert 'placeholder="e.g. {"status": "completed"}"' in box
    assert "Seed 003" not in page
    assert "A label of your own" in page  # the category's help


def test_empty_boxes_save_no_expectation(client: Client, agency: Agency) -> None:
    empty = {
        "expected_states": "",
        "expected_actions": "",
        "expected_transitions": "",
        "success_conditions": "",
    }
    response = client.post(ADD, _form(**empty))

    assert response.status_code == 302, _errors(response)[-3000:]
    [workflow] = _saved(agency)
    assert workflow.expected_states == []
    assert workflow.expected_actions == []
    assert workflow.expected_transitions == []
    assert workflow.success_conditions == {}
