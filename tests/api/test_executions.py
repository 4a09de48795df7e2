"""Executions over REST: manual execute (202), history, detail with steps, cancel."""

from __future__ import annotations

import datetime

import pytest
from django.utils import timezone

from agents.models import Execution, ExecutionStatus, TriggerLog
from core.models import Role
from tests.agents.factories import AgentFactory, ExecutionFactory, ExecutionStepFactory
from tests.api.conftest import count, fields_of

EXECUTIONS = "/api/v1/executions/"


@pytest.fixture
def agent(tenant_a):
    return AgentFactory.create(agency=tenant_a.agency, site=tenant_a.site)


def test_execute_returns_202_with_the_new_execution(agent, as_role) -> None:
    response = as_role(Role.STAFF).post(
        f"/api/v1/agents/{agent.id}/execute/",
        {"input": "Follow up on new leads", "trigger_data": {"source": "api"}},
        format="json",
    )
    assert response.status_code == 202, response.json()
    execution_id = response.json()["execution_id"]
    assert response.json()["status"] == ExecutionStatus.PENDING
    assert count(Execution, pk=execution_id, agent=agent, input="Follow up on new leads") == 1
    history = as_role(Role.VIEWER).get(f"/api/v1/agents/{agent.id}/executions/").json()
    assert [e["id"] for e in history["results"]] == [execution_id]


def test_execute_an_inactive_agent_is_409_and_the_skip_is_logged(tenant_a, as_role) -> None:
    agent = AgentFactory.create(agency=tenant_a.agency, site=tenant_a.site, is_active=False)
    response = as_role(Role.STAFF).post(f"/api/v1/agents/{agent.id}/execute/", {}, format="json")
    assert response.status_code == 409
    assert response.json()["code"] == "agent_inactive"
    assert count(Execution) == 0
    assert count(TriggerLog, agent=agent, outcome="skipped") == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"input": 5, "extra": True}, "extra"),
        ({"trigger_data": "not an object"}, "trigger_data"),
        ({"input": "x" * 20_001}, "input"),
    ],
)
def test_execute_bad_input_starts_nothing(agent, as_role, body, field) -> None:
    response = as_role(Role.STAFF).post(f"/api/v1/agents/{agent.id}/execute/", body, format="json")
    assert field in fields_of(response)
    assert count(Execution) == 0
    assert count(TriggerLog) == 0


def test_detail_has_the_steps_in_order(agent, as_role) -> None:
    execution = ExecutionFactory.create(agent=agent)
    for number in (2, 1):
        ExecutionStepFactory.create(execution=execution, step_number=number)
    detail = as_role(Role.VIEWER).get(f"{EXECUTIONS}{execution.id}/").json()
    assert [s["step_number"] for s in detail["steps"]] == [1, 2]
    listed = as_role(Role.VIEWER).get(EXECUTIONS, {"status": "pending"}).json()
    assert [e["id"] for e in listed["results"]] == [str(execution.id)]
    assert "steps" not in listed["results"][0]


def test_an_execution_says_how_many_deliveries_claimed_it_and_its_error_details(
    agent, as_role
) -> None:
    execution = ExecutionFactory.create(
        agent=agent,
        status=ExecutionStatus.FAILED,
        attempts=2,
        error="Gave up",
        error_details={"provider": "openai", "status": 503},
    )
    detail = as_role(Role.VIEWER).get(f"{EXECUTIONS}{execution.id}/").json()
    assert (detail["attempts"], detail["error_details"]) == (
        2,
        {"provider": "openai", "status": 503},
    )


def test_list_filter_with_a_bad_value_is_400(agent, as_role) -> None:
    assert "status" in fields_of(as_role(Role.VIEWER).get(EXECUTIONS, {"status": "bogus"}))
    assert "agent" in fields_of(as_role(Role.VIEWER).get(EXECUTIONS, {"agent": "x"}))


def test_cancel_a_pending_execution(agent, as_role) -> None:
    execution = ExecutionFactory.create(agent=agent)
    response = as_role(Role.STAFF).post(f"{EXECUTIONS}{execution.id}/cancel/")
    assert response.status_code == 200
    assert response.json()["status"] == ExecutionStatus.CANCELLED
    assert count(Execution, pk=execution.id, status=ExecutionStatus.CANCELLED) == 1


@pytest.mark.parametrize(
    ("lease_left", "status"),
    [(300, ExecutionStatus.RUNNING), (-1, ExecutionStatus.CANCELLED)],
    ids=["worker holds it", "lease ran out"],
)
def test_cancel_of_a_running_execution_waits_only_for_a_live_worker(
    agent, as_role, lease_left, status
) -> None:
    execution = ExecutionFactory.create(
        agent=agent,
        status=ExecutionStatus.RUNNING,
        lease_owner="host:1:2",
        lease_expires_at=timezone.now() + datetime.timedelta(seconds=lease_left),
    )
    response = as_role(Role.STAFF).post(f"{EXECUTIONS}{execution.id}/cancel/")
    assert response.status_code == 200
    assert (response.json()["status"], response.json()["cancel_requested_at"] is not None) == (
        status,
        True,
    )
    assert count(Execution, pk=execution.id, status=status) == 1


def test_cancel_with_a_body_is_a_field_error_and_cancels_nothing(agent, as_role) -> None:
    execution = ExecutionFactory.create(agent=agent)
    url = f"{EXECUTIONS}{execution.id}/cancel/"
    response = as_role(Role.STAFF).post(url, "{not json", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["code"] == "parse_error"
    assert "reason" in fields_of(as_role(Role.STAFF).post(url, {"reason": "x"}, format="json"))
    assert count(Execution, pk=execution.id, status=ExecutionStatus.PENDING) == 1


@pytest.mark.parametrize("body", ["null", "[]", '["reason"]'])
def test_cancel_with_a_body_that_is_not_an_object_is_400_and_cancels_nothing(
    agent, as_role, body
) -> None:
    execution = ExecutionFactory.create(agent=agent)
    response = as_role(Role.STAFF).post(
        f"{EXECUTIONS}{execution.id}/cancel/", body, content_type="application/json"
    )
    assert response.status_code == 400, response.json()
    assert count(Execution, pk=execution.id, status=ExecutionStatus.PENDING) == 1
    # An empty object is no body at all.
    empty = as_role(Role.STAFF).post(f"{EXECUTIONS}{execution.id}/cancel/", {}, format="json")
    assert empty.status_code == 200


@pytest.mark.parametrize("role", [Role.VIEWER, Role.APPROVER])
def test_readers_cannot_execute_or_cancel(agent, as_role, role) -> None:
    execution = ExecutionFactory.create(agent=agent)
    client = as_role(role)
    assert client.post(f"/api/v1/agents/{agent.id}/execute/", {}, format="json").status_code == 403
    assert client.post(f"{EXECUTIONS}{execution.id}/cancel/").status_code == 403
    assert count(Execution, status=ExecutionStatus.PENDING) == 1


def test_another_agencys_execution_is_a_404(tenant_b, as_role) -> None:
    theirs = ExecutionFactory.create(agent__agency=tenant_b.agency, agent__site=tenant_b.site)
    client = as_role(Role.ADMIN)
    assert client.get(f"{EXECUTIONS}{theirs.id}/").status_code == 404
    assert client.post(f"{EXECUTIONS}{theirs.id}/cancel/").status_code == 404
    assert client.get(f"{EXECUTIONS}not-a-uuid/").status_code == 404
    assert client.get(EXECUTIONS).json()["count"] == 0
    assert count(Execution, pk=theirs.id, status=ExecutionStatus.PENDING) == 1


@pytest.mark.parametrize("ordering", ["cost_usd", "-completed_at", "tokens_total"])
def test_paging_through_equal_values_shows_every_execution_once(agent, as_role, ordering) -> None:
    # Every row has the same cost, end time and tokens: only a tie-break makes paging exact.
    ExecutionFactory.create_batch(120, agent=agent, completed_at=agent.created_at)
    client = as_role(Role.VIEWER)
    seen: list[str] = []
    for page in range(1, 6):
        response = client.get(EXECUTIONS, {"ordering": ordering, "page": page, "page_size": 25})
        seen += [row["id"] for row in response.json()["results"]]
    assert len(seen) == 120
    assert len(set(seen)) == 120


def test_executions_are_listed_by_purpose_the_agents_runs_apart_from_its_experiments(
    agent, as_role
) -> None:
    run = ExecutionFactory.create(agent=agent)
    rehearsal = ExecutionFactory.create(agent=agent, purpose="evaluation")
    client = as_role(Role.VIEWER)

    def listed(path: str, **query: str) -> dict[str, str]:
        response = client.get(path, query)
        assert response.status_code == 200, response.json()
        return {e["id"]: e["purpose"] for e in response.json()["results"]}

    for path in (EXECUTIONS, f"/api/v1/agents/{agent.id}/executions/"):
        # Without the filter both, each saying which it is.
        assert listed(path) == {str(run.pk): "run", str(rehearsal.pk): "evaluation"}
        assert listed(path, purpose="run") == {str(run.pk): "run"}
        assert listed(path, purpose="evaluation") == {str(rehearsal.pk): "evaluation"}
    assert "purpose" in fields_of(client.get(EXECUTIONS, {"purpose": "rehearsal"}))


INPUTS = {
    "type": "object",
    "properties": {"client": {"type": "string"}, "year": {"type": "integer"}},
    "required": ["client"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, "'client' is a required property"),
        ({"client": "Ada", "year": "2025"}, "year: '2025' is not of type 'integer'"),
        ({"client": "Ada", "vip": True}, "Additional properties are not allowed"),
    ],
)
def test_execute_with_data_that_does_not_match_the_declared_inputs_starts_nothing(
    tenant_a, as_role, data, message
) -> None:
    agent = AgentFactory.create(agency=tenant_a.agency, site=tenant_a.site, input_schema=INPUTS)
    response = as_role(Role.STAFF).post(
        f"/api/v1/agents/{agent.id}/execute/", {"trigger_data": data}, format="json"
    )
    errors = fields_of(response, 422)
    assert any(message in m for m in errors["trigger_data"]), errors
    assert count(Execution) == 0


def test_execute_with_the_declared_inputs_starts_the_run_with_them(tenant_a, as_role) -> None:
    agent = AgentFactory.create(agency=tenant_a.agency, site=tenant_a.site, input_schema=INPUTS)
    response = as_role(Role.STAFF).post(
        f"/api/v1/agents/{agent.id}/execute/",
        {"trigger_data": {"client": "Ada", "year": 2025}},
        format="json",
    )
    assert response.status_code == 202, response.json()
    assert count(Execution, trigger_data={"client": "Ada", "year": 2025}) == 1
