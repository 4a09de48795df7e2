"""Learning in the admin: staff see, edit and delete an agency's learned patterns (not another
agency's); the run page shows the run's quality and marks it good or bad; the agent page shows
its quality per day."""

from __future__ import annotations

import json
import uuid

import pytest
from django.test import Client

from agents.models import Agent
from core import tenancy
from core.models import Agency, Role
from memory.learning.models import LearnedPattern, RunQuality
from memory.learning.services import learn_after_run
from tests.admin.helpers import admin_url, change_url
from tests.agents.factories import AgentFactory
from tests.factories import AgencyFactory, MembershipFactory
from tests.memory.learning.helpers import finished_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def agency() -> Agency:
    return AgencyFactory.create()


@pytest.fixture
def agent(agency: Agency) -> Agent:
    return AgentFactory.create(agency=agency, learning_enabled=True)


@pytest.fixture
def client(agency: Agency) -> Client:
    client = Client()
    client.force_login(MembershipFactory.create(agency=agency, role=Role.STAFF).user)
    return client


def learned(agent: Agent) -> LearnedPattern:
    learn_after_run(finished_run(agent).id, agency_id=agent.agency_id)
    with tenancy.agency_context(agent.agency_id):
        return LearnedPattern.objects.get(agent=agent)


def fetch(pk: uuid.UUID) -> LearnedPattern | None:
    with tenancy.platform_context():
        return LearnedPattern.objects.filter(pk=pk).first()


def test_staff_see_their_agencys_patterns_only(agent: Agent, client: Client) -> None:
    mine = learned(agent)
    theirs = learned(AgentFactory.create(learning_enabled=True))

    page = client.get(admin_url(LearnedPattern, "changelist"))
    other = client.get(change_url(theirs))

    html = page.content.decode()
    assert page.status_code == 200
    assert str(mine.pk) in html
    assert str(theirs.pk) not in html
    assert other.status_code == 404


def test_staff_edit_a_pattern(agent: Agent, client: Client) -> None:
    pattern = learned(agent)
    steps = [{"tool": "crm_get_contact", "arguments": {"email": "<email>"}}]
    form = {
        "task_type": "manual:log/contact",
        "description": pattern.description,
        "steps": json.dumps(steps),
        "confidence": "0.55",
        "is_active": "on",
    }

    response = client.post(change_url(pattern), form)

    assert response.status_code == 302, response.content.decode()[:3000]
    saved = fetch(pattern.pk)
    assert saved is not None
    assert saved.task_type == "manual:log/contact"
    assert saved.steps == steps
    assert saved.tool_sequence == ["crm_get_contact"]
    assert str(saved.confidence) == "0.55"


def test_a_bad_edit_is_a_form_error_and_changes_nothing(agent: Agent, client: Client) -> None:
    pattern = learned(agent)
    form = {
        "task_type": "x",
        "description": pattern.description,
        "steps": json.dumps([{"arguments": {}}]),
        "confidence": "1.50",
    }

    response = client.post(change_url(pattern), form)

    assert response.status_code == 200
    saved = fetch(pattern.pk)
    assert saved is not None
    assert saved.task_type == pattern.task_type
    assert saved.confidence == pattern.confidence


def test_staff_delete_a_pattern(agent: Agent, client: Client) -> None:
    pattern = learned(agent)

    response = client.post(admin_url(pattern, "delete", pattern.pk), {"post": "yes"})

    assert response.status_code == 302
    assert fetch(pattern.pk) is None


def test_the_run_page_shows_the_quality_and_staff_mark_the_run_bad(
    agent: Agent, client: Client
) -> None:
    execution = finished_run(agent)
    learn_after_run(execution.id, agency_id=agent.agency_id)
    mark_url = admin_url(RunQuality, "mark", execution.pk, "bad")

    page = client.get(change_url(execution))
    confirm = client.get(mark_url)
    marked = client.post(mark_url, {"note": "Wrong contact."})

    html = page.content.decode()
    assert page.status_code == 200
    assert "Quality 100 %" in html
    assert 'data-signal="tools"' in html
    assert mark_url in html
    assert confirm.status_code == 200
    assert marked.status_code == 302
    with tenancy.agency_context(agent.agency_id):
        row = RunQuality.objects.get(execution_id=execution.pk)
    assert (row.human_mark, row.human_note, row.pattern_id) == ("bad", "Wrong contact.", None)


def test_a_viewer_cannot_mark_a_run(agent: Agent, agency: Agency) -> None:
    execution = finished_run(agent)
    viewer = Client()
    viewer.force_login(MembershipFactory.create(agency=agency, role=Role.VIEWER).user)

    response = viewer.post(admin_url(RunQuality, "mark", execution.pk, "good"))

    assert response.status_code == 403
    with tenancy.agency_context(agent.agency_id):
        assert not RunQuality.objects.filter(execution_id=execution.pk).exists()


def test_the_agent_page_shows_its_quality_per_day(agent: Agent, client: Client) -> None:
    for _ in range(2):
        learn_after_run(finished_run(agent).id, agency_id=agent.agency_id)

    page = client.get(change_url(agent))

    html = page.content.decode()
    assert page.status_code == 200
    assert "Quality and learning" in html
    assert "1 learned pattern" in html
    assert '<td style="text-align:right;padding:2px 8px">2</td>' in html
