"""Learning over REST: mark a run good or bad (400 for bad input, nothing written; 404 for another
agency's run), read its quality, list and delete an agent's patterns."""

from __future__ import annotations

import pytest

from agents.models import Agent, ExecutionStatus
from core import tenancy
from core.models import Role
from memory.learning.models import LearnedPattern, RunQuality
from memory.learning.services import learn_after_run
from tests.agents.factories import AgentFactory
from tests.api.conftest import key_client
from tests.memory.learning.helpers import finished_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent() -> Agent:
    return AgentFactory.create(learning_enabled=True)


def quality_url(execution_id: object) -> str:
    return f"/api/v1/executions/{execution_id}/quality/"


def test_marking_a_run_good_stores_its_pattern(agent: Agent) -> None:
    execution = finished_run(agent, status=ExecutionStatus.CANCELLED)
    client = key_client(agent.agency)

    before = client.get(quality_url(execution.id))
    marked = client.post(
        quality_url(execution.id), {"mark": "good", "note": "Right call."}, format="json"
    )
    after = client.get(quality_url(execution.id))

    assert before.status_code == 404
    assert marked.status_code == 200, marked.json()
    body = marked.json()
    assert (body["human_mark"], body["human_note"], body["is_good"]) == (
        "good",
        "Right call.",
        True,
    )
    assert body["score"] < body["threshold"]  # cancelled: the mark overrides the threshold
    assert after.json()["pattern"] == body["pattern"] is not None
    with tenancy.agency_context(agent.agency_id):
        assert LearnedPattern.objects.filter(agent=agent).count() == 1


@pytest.mark.parametrize(
    "body", [{"mark": "great"}, {}, {"mark": "good", "extra": 1}, {"mark": "bad", "note": []}]
)
def test_a_bad_mark_is_a_400_and_writes_nothing(agent: Agent, body: dict[str, object]) -> None:
    execution = finished_run(agent)

    response = key_client(agent.agency).post(quality_url(execution.id), body, format="json")

    assert response.status_code == 400, response.json()
    assert response.json()["message"]
    with tenancy.agency_context(agent.agency_id):
        assert not RunQuality.objects.filter(execution_id=execution.id).exists()


def test_a_running_run_cannot_be_marked(agent: Agent) -> None:
    execution = finished_run(agent, status=ExecutionStatus.RUNNING)

    response = key_client(agent.agency).post(
        quality_url(execution.id), {"mark": "good"}, format="json"
    )

    assert response.status_code == 400
    assert response.json()["code"] == "not_finished"


def test_another_agencys_run_and_patterns_are_not_found(agent: Agent) -> None:
    execution = finished_run(agent)
    learn_after_run(execution.id, agency_id=agent.agency_id)
    other = key_client(AgentFactory.create().agency)

    assert other.post(quality_url(execution.id), {"mark": "bad"}, format="json").status_code == 404
    assert other.get(quality_url(execution.id)).status_code == 404
    assert other.get(f"/api/v1/agents/{agent.id}/patterns/").status_code == 404
    with tenancy.agency_context(agent.agency_id):
        assert RunQuality.objects.get(execution_id=execution.id).human_mark == ""


def test_a_viewer_reads_but_cannot_mark(agent: Agent) -> None:
    execution = finished_run(agent)
    learn_after_run(execution.id, agency_id=agent.agency_id)
    viewer = key_client(agent.agency, Role.VIEWER)

    assert viewer.get(quality_url(execution.id)).status_code == 200
    assert viewer.post(quality_url(execution.id), {"mark": "bad"}, format="json").status_code == 403


def test_staff_list_and_delete_an_agents_patterns(agent: Agent) -> None:
    learn_after_run(finished_run(agent).id, agency_id=agent.agency_id)
    client = key_client(agent.agency)
    url = f"/api/v1/agents/{agent.id}/patterns/"

    listed = client.get(url)
    (pattern,) = listed.json()["results"]
    deleted = client.delete(f"{url}{pattern['id']}/")
    again = client.delete(f"{url}{pattern['id']}/")

    assert listed.status_code == 200
    assert pattern["tool_sequence"] == ["crm_search_contacts", "crm_add_note"]
    assert "embedding" not in pattern
    assert deleted.status_code == 204
    assert again.status_code == 404
    with tenancy.agency_context(agent.agency_id):
        assert not LearnedPattern.objects.filter(agent=agent).exists()
