"""Evaluations over REST: datasets created, a case added by hand, JSONL exported and imported
(a bad line is a 400 naming it, nothing written), a finished run saved as a test case, and
another agency's dataset or run a 404; viewers may read, not write."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agents.models import Execution, ExecutionStatus
from core import tenancy
from core.models import Role
from evals.models import Dataset, TestCase
from tests.agents.factories import AgentFactory
from tests.api.conftest import Tenant, token_client
from tools.models import ToolCall

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent(tenant_a: Tenant) -> Any:
    return AgentFactory.create(agency=tenant_a.agency, site=tenant_a.site)


def _dataset(client: Any, agent: Any, name: str = "Alex") -> dict[str, Any]:
    response = client.post(
        "/api/v1/datasets/", {"name": name, "agent": str(agent.pk)}, format="json"
    )
    assert response.status_code == 201, response.json()
    return response.json()


def test_a_case_added_by_hand_exports_and_imports_as_jsonl(tenant_a: Tenant, agent: Any) -> None:
    client = token_client(tenant_a.users[Role.STAFF])
    dataset = _dataset(client, agent)
    assert dataset["current_version"] == 1
    url = f"/api/v1/datasets/{dataset['id']}"
    case = {"name": "Hello", "input": "Say hello", "expectations": {"output_contains": ["hello"]}}
    response = client.post(f"{url}/cases/", case, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["version"] == 2
    exported = client.get(f"{url}/export/").json()
    assert exported["version"] == 2
    assert json.loads(exported["jsonl"])["expectations"] == case["expectations"]

    copy = _dataset(client, agent, "Copy")
    response = client.post(
        f"/api/v1/datasets/{copy['id']}/import/", {"jsonl": exported["jsonl"]}, format="json"
    )
    assert response.status_code == 201, response.json()
    cases = client.get(f"/api/v1/datasets/{copy['id']}/cases/").json()["results"]
    assert [c["name"] for c in cases] == ["Hello"]


def test_a_bad_jsonl_line_is_a_400_naming_it_and_nothing_is_written(
    tenant_a: Tenant, agent: Any
) -> None:
    client = token_client(tenant_a.users[Role.STAFF])
    dataset = _dataset(client, agent)
    text = json.dumps({"name": "ok"}) + "\n" + json.dumps({"name": "bad", "expectations": []})
    response = client.post(
        f"/api/v1/datasets/{dataset['id']}/import/", {"jsonl": text}, format="json"
    )
    assert response.status_code == 422  # well formed, against a case's rules
    assert response.json()["code"] == "invalid_case"
    assert "line 2.expectations" in response.json()["message"]
    with tenancy.agency_context(tenant_a.agency.id):
        assert Dataset.objects.get(pk=dataset["id"]).versions.count() == 1
        assert not TestCase.objects.filter(version__dataset_id=dataset["id"]).exists()


def test_a_finished_run_is_saved_as_a_case_with_its_recorded_calls(
    tenant_a: Tenant, agent: Any
) -> None:
    client = token_client(tenant_a.users[Role.STAFF])
    dataset = _dataset(client, agent)
    with tenancy.agency_context(tenant_a.agency.id):
        execution = Execution.objects.create(
            agency=tenant_a.agency, agent=agent, site=tenant_a.site, trigger_type="manual",
            input="Find Marcus", trigger_data={"source": "test"},
            status=ExecutionStatus.COMPLETED, output="Found him.",
        )  # fmt: skip
        ToolCall.objects.create(
            agency=tenant_a.agency, agent=agent, execution=execution, tool_name="crm_search",
            tool_call_id="c1", idempotency_key=f"{execution.pk}:c1", input={"q": "Marcus"},
            output={"count": 1}, status="completed",
        )  # fmt: skip
    response = client.post(
        f"/api/v1/executions/{execution.pk}/test-case/", {"dataset": dataset["id"]}, format="json"
    )
    assert response.status_code == 201, response.json()
    [case] = client.get(f"/api/v1/datasets/{dataset['id']}/cases/").json()["results"]
    assert case["input"] == "Find Marcus"
    assert case["trigger_payload"] == {"source": "test"}
    assert case["recorded_calls"] == [
        {"tool": "crm_search", "arguments": {"q": "Marcus"}, "output": {"count": 1},
         "status": "completed"}
    ]  # fmt: skip
    assert case["expectations"] == {"must_call": ["crm_search"], "final_status": "completed"}
    assert case["source_execution_id"] == str(execution.pk)


def test_a_run_still_going_is_refused(tenant_a: Tenant, agent: Any) -> None:
    client = token_client(tenant_a.users[Role.STAFF])
    dataset = _dataset(client, agent)
    with tenancy.agency_context(tenant_a.agency.id):
        execution = Execution.objects.create(
            agency=tenant_a.agency, agent=agent, site=tenant_a.site, trigger_type="manual",
            status=ExecutionStatus.RUNNING,
        )  # fmt: skip
    response = client.post(
        f"/api/v1/executions/{execution.pk}/test-case/", {"dataset": dataset["id"]}, format="json"
    )
    assert (response.status_code, response.json()["code"]) == (409, "not_ended")


def test_a_reference_to_another_agencys_agent_is_a_422_and_a_taken_name_a_409(
    tenant_a: Tenant, tenant_b: Tenant, agent: Any
) -> None:
    theirs = AgentFactory.create(agency=tenant_b.agency, site=tenant_b.site)
    client = token_client(tenant_a.users[Role.STAFF])
    response = client.post(
        "/api/v1/datasets/", {"name": "X", "agent": str(theirs.pk)}, format="json"
    )
    assert response.status_code == 422
    _dataset(client, agent, "Taken")
    response = client.post("/api/v1/datasets/", {"name": "Taken"}, format="json")
    assert (response.status_code, response.json()["code"]) == (409, "duplicate_name")


def test_another_agencys_dataset_and_run_are_404s_and_viewers_only_read(
    tenant_a: Tenant, tenant_b: Tenant, agent: Any
) -> None:
    mine = _dataset(token_client(tenant_a.users[Role.STAFF]), agent)
    theirs = token_client(tenant_b.users[Role.ADMIN])
    assert theirs.get(f"/api/v1/datasets/{mine['id']}/").status_code == 404
    response = theirs.post(f"/api/v1/datasets/{mine['id']}/cases/", {"name": "x"}, format="json")
    assert response.status_code == 404
    viewer = token_client(tenant_a.users[Role.VIEWER])
    assert viewer.get(f"/api/v1/datasets/{mine['id']}/").status_code == 200
    response = viewer.post(f"/api/v1/datasets/{mine['id']}/cases/", {"name": "x"}, format="json")
    assert response.status_code == 403
