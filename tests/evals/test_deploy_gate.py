"""The deploy gate (issue 28), through a real worker and the demo model: a change of a gated
agent waits as a version that is not current while the gate's experiment runs; one that removes
a tool the case needs fails (the command exits non-zero for it, the API refuses to activate it
with a 409 naming the failed case) and the agent keeps its version; one that passes becomes
current by itself; a version with a passing experiment activates over the API. The gate's
configuration is checked (422 naming the field); a draft of the editor is tested without being
saved."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import Client, override_settings

from agents.models import Agent, AgentVersion
from agents.services import agent_create, agent_update
from core import tenancy
from core.exceptions import ApplicationError
from core.models import Agency, Role
from evals.models import (
    DeployGate,
    Experiment,
    ExperimentKind,
    ExperimentStatus,
    TestCase,
)
from evals.services.datasets import dataset_case_add, dataset_create
from evals.services.gate import deploy_gate_set
from tests.admin.conftest import member
from tests.api.conftest import Tenant, token_client
from tests.evals.forms import form_values
from tests.evals.test_experiments import (  # noqa: F401 - fixtures
    ASK,
    _agent,
    _command,
    _dataset_of,
    _experiment,
    _run,
    demo_agency,
    demo_model,
)
from tests.factories import MembershipFactory
from tests.processes import Worker


def _completed(experiment: Experiment) -> Experiment:
    deadline = time.monotonic() + 90
    while True:
        with tenancy.agency_context(experiment.agency_id):
            found = Experiment.objects.get(pk=experiment.pk)
        if found.status == ExperimentStatus.COMPLETED:
            return found
        assert time.monotonic() < deadline, "experiment still running"
        time.sleep(0.2)


def _current(agent: Agent) -> int:
    with tenancy.agency_context(agent.agency_id):
        version = Agent.objects.select_related("current_version").get(pk=agent.pk).current_version
    assert version is not None
    return version.number


def _gate_experiment(agent: Agent, number: int) -> Experiment:
    with tenancy.agency_context(agent.agency_id):
        return Experiment.objects.get(
            agent=agent, agent_version__number=number, kind=ExperimentKind.GATE
        )


@pytest.mark.slow
def test_a_change_that_removes_a_needed_tool_fails_the_gate_and_a_passing_one_becomes_current(
    demo_agency: Agency,  # noqa: F811 - the fixture imported above
    celery_worker: Worker,
) -> None:
    alex = _agent(demo_agency, "alex")
    run = _run(alex, ASK)
    dataset = _dataset_of(run, alex)
    with tenancy.agency_context(demo_agency.id):
        [case] = TestCase.objects.filter(version=dataset.current_version)
    client = token_client(MembershipFactory.create(agency=demo_agency, role=Role.STAFF).user)
    gate = client.put(
        f"/api/v1/agents/{alex.pk}/deploy-gate/",
        {"dataset": str(dataset.pk), "min_pass_rate": 0.9},
        format="json",
    )
    assert gate.status_code == 200, gate.json()
    assert (gate.json()["min_pass_rate"], gate.json()["is_active"]) == (0.9, True)
    before = _current(alex)

    # A save that removes task_create: recorded, not current; the agent runs as before.
    with tenancy.agency_context(demo_agency.id):
        agent_update(agent=alex, denied_tools=["task_create"])
        held = AgentVersion.objects.filter(agent=alex).order_by("-number").first()
        assert held is not None
        assert held.config["denied_tools"] == ["task_create"]
        assert Agent.objects.get(pk=alex.pk).denied_tools == []
    assert held.number == before + 1
    assert _current(alex) == before
    failed = _completed(_gate_experiment(alex, held.number))
    assert (failed.passed_count, failed.case_count) == (0, 1)
    assert _current(alex) == before  # it failed: still not current

    command = _command(
        "run", "--agent", str(alex.pk), "--dataset", dataset.name,
        "--version", str(held.number), "--min-pass", "0.9",
    )  # fmt: skip
    assert command.returncode == 1, command.stderr
    assert "failed: must call task_create" in command.stdout

    refused = client.post(f"/api/v1/agents/{alex.pk}/versions/{held.number}/activate/")
    assert refused.status_code == 409, refused.json()
    body = refused.json()
    assert body["code"] == "gate_not_passed"
    assert f"Version {held.number} failed the deploy gate" in body["message"]
    assert repr(case.name) in body["message"]
    assert body["extra"]["failed_cases"] == [case.name]
    assert _current(alex) == before

    # A change that keeps the tool passes, and becomes current by itself.
    with tenancy.agency_context(demo_agency.id):
        agent_update(agent=alex, description="Follows up with contacts after a demo.")
    passing = held.number + 1
    assert _current(alex) == before
    passed = _completed(_gate_experiment(alex, passing))
    assert passed.passed_count == passed.case_count == 1
    deadline = time.monotonic() + 30
    while _current(alex) != passing:
        assert time.monotonic() < deadline, "the passing version did not become current"
        time.sleep(0.2)
    with tenancy.agency_context(demo_agency.id):
        saved = Agent.objects.get(pk=alex.pk)
    assert (saved.description, saved.denied_tools) == ("Follows up with contacts after a demo.", [])

    # Version 1 has no experiment: refused; once one passes on it, it activates.
    refused = client.post(f"/api/v1/agents/{alex.pk}/versions/1/activate/")
    assert refused.status_code == 409
    assert refused.json()["message"] == "Version 1 has no passing gate experiment yet."
    assert _experiment(alex, dataset, version=1).passed_count == 1
    activated = client.post(f"/api/v1/agents/{alex.pk}/versions/1/activate/")
    assert activated.status_code == 200, activated.json()
    assert activated.json() == {"agent": str(alex.pk), "current_version": 1}
    assert _current(alex) == 1


@pytest.mark.slow
def test_a_draft_is_tested_without_saving_anything_and_one_without_a_needed_tool_fails(
    demo_agency: Agency,  # noqa: F811 - the fixture imported above
    celery_worker: Worker,
) -> None:
    alex = _agent(demo_agency, "alex")
    dataset = _dataset_of(_run(alex, ASK), alex)
    client = Client()
    client.force_login(member(demo_agency, Role.STAFF))
    editor = f"/admin/agents/agent/{alex.pk}/change/"
    page = client.get(editor)
    assert "Test this draft" in page.content.decode()
    with tenancy.agency_context(demo_agency.id):
        versions = AgentVersion.objects.filter(agent=alex).count()
    url = f"/admin/evals/deploygate/test-draft/{alex.pk}/"
    form = form_values(page.content.decode(), form_id="agent_form")

    bad = client.post(url, {**form, "allowed_tools": "crm-*", "_draft_dataset": str(dataset.pk)})
    assert bad.status_code == 400
    assert "contains &#x27;-&#x27;" in bad.content.decode()

    draft = {**form, "denied_tools": "task_create", "_draft_dataset": str(dataset.pk)}
    started = client.post(url, draft)
    assert started.status_code == 302, started.content.decode()[:2000]
    with tenancy.agency_context(demo_agency.id):
        experiment = Experiment.objects.get(agent=alex, kind=ExperimentKind.DRAFT)
        assert experiment.draft_config is not None
        assert experiment.draft_config["denied_tools"] == ["task_create"]
        assert AgentVersion.objects.filter(agent=alex).count() == versions  # none made
        assert Agent.objects.get(pk=alex.pk).denied_tools == []  # nothing saved
    assert started["Location"] == f"/admin/evals/experiment/{experiment.pk}/change/"
    done = _completed(experiment)
    assert done.passed_count == 0
    with tenancy.agency_context(demo_agency.id):
        [result] = done.results.all()
    failed = [check["check"] for check in result.checks if not check["passed"]]
    assert failed == ["must call task_create"]

    # Saved in the editor with a gate: the old version stays current until the gate decides.
    with tenancy.agency_context(demo_agency.id):
        deploy_gate_set(agent=alex, dataset=dataset, min_pass_rate="0.9")
        case_name = TestCase.objects.get(version=dataset.current_version).name
    before = _current(alex)
    saved = client.post(editor, {**form, "denied_tools": "task_create"}, follow=True)
    assert saved.status_code == 200
    page_text = saved.content.decode()
    held = before + 1
    assert f"Saved as version {held}, awaiting the deploy gate" in page_text
    assert f"The agent keeps running version {before} until then." in page_text
    assert _current(alex) == before
    with tenancy.agency_context(demo_agency.id):
        assert Agent.objects.get(pk=alex.pk).denied_tools == []
    gate = _completed(_gate_experiment(alex, held))
    assert _current(alex) == before
    page_text = client.get(editor).content.decode()
    assert f"Version {held} failed the deploy gate" in page_text
    assert f"Failed: {case_name} (" in page_text
    assert f"/admin/evals/experiment/{gate.pk}/change/" in page_text


def test_a_gate_is_checked_naming_the_field_and_changes_nothing(
    tenant_a: Tenant, tenant_b: Tenant
) -> None:
    client = token_client(tenant_a.users[Role.STAFF])
    mine = _api_agent(tenant_a, "Alex")
    other = _api_agent(tenant_a, "Sam")
    url = f"/api/v1/agents/{mine.pk}/deploy-gate/"
    with tenancy.agency_context(tenant_a.agency.id):
        empty = dataset_create(agency_id=tenant_a.agency.id, name="Empty", agent=mine, user_id=None)
        sams = dataset_create(agency_id=tenant_a.agency.id, name="Sam's", agent=other, user_id=None)
    with tenancy.agency_context(tenant_b.agency.id):
        theirs = dataset_create(agency_id=tenant_b.agency.id, name="Theirs", user_id=None)

    cases: list[tuple[dict[str, Any], str, str]] = [
        ({"dataset": str(empty.pk), "min_pass_rate": 0.9}, "dataset", "has no test case yet"),
        ({"dataset": str(sams.pk), "min_pass_rate": 0.9}, "dataset", "another agent's"),
        ({"dataset": str(theirs.pk), "min_pass_rate": 0.9}, "dataset", "does not exist"),
        ({"dataset": str(empty.pk), "min_pass_rate": 1.5}, "min_pass_rate", "from 0 to 1"),
    ]
    for body, field, message in cases:
        response = client.put(url, body, format="json")
        assert response.status_code == 422, (body, response.json())
        assert message in " ".join(response.json()["extra"]["fields"].get(field, [])), (
            response.json()
        )
    with tenancy.agency_context(tenant_a.agency.id):
        assert not DeployGate.objects.exists()
    missing = client.get(url)
    assert (missing.status_code, missing.json()["code"]) == (404, "no_gate")
    viewer = token_client(tenant_a.users[Role.VIEWER])
    assert viewer.put(url, cases[0][0], format="json").status_code == 403
    assert token_client(tenant_b.users[Role.STAFF]).get(url).status_code == 404


def test_without_a_gate_any_version_activates_over_the_api(tenant_a: Tenant) -> None:
    client = token_client(tenant_a.users[Role.STAFF])
    agent = _api_agent(tenant_a, "Alex")
    with tenancy.agency_context(tenant_a.agency.id):
        agent_update(agent=agent, description="Second.")
    assert _current(agent) == 2
    response = client.post(f"/api/v1/agents/{agent.pk}/versions/1/activate/")
    assert response.status_code == 200, response.json()
    assert _current(agent) == 1
    with tenancy.agency_context(tenant_a.agency.id):
        assert Agent.objects.get(pk=agent.pk).description == ""
        assert AgentVersion.objects.filter(agent=agent).count() == 2  # no new version
    again = client.post(f"/api/v1/agents/{agent.pk}/versions/1/activate/")
    assert (again.status_code, again.json()["code"]) == (409, "already_current")


def _api_agent(tenant: Tenant, name: str, **fields: Any) -> Agent:
    with tenancy.agency_context(tenant.agency.id):
        return agent_create(
            agency_id=tenant.agency.id,
            site=tenant.site,
            name=name,
            agent_type="specialist",
            **fields,
        )


def test_a_restore_with_a_gate_waits_for_it_and_the_page_says_so(tenant_a: Tenant) -> None:
    agent = _api_agent(tenant_a, "Alex", is_active=True)
    with tenancy.agency_context(tenant_a.agency.id):
        dataset = dataset_create(
            agency_id=tenant_a.agency.id, name="Cases", agent=agent, user_id=None
        )
        dataset_case_add(
            dataset=dataset,
            case={
                "name": "Says hello",
                "input": "Hello.",
                "expectations": {"final_status": "completed"},
            },
            user_id=None,
        )
        dataset.refresh_from_db()
        agent_update(agent=agent, description="Second.")  # version 2, no gate yet
        deploy_gate_set(agent=agent, dataset=dataset, min_pass_rate="1")
    client = Client()
    client.force_login(tenant_a.users[Role.STAFF])

    response = client.post(f"/admin/agents/agent/{agent.pk}/versions/1/restore/", follow=True)

    text = response.content.decode()
    assert "Saved as version 3, awaiting the deploy gate" in text
    assert "Version 3 is awaiting the gate: 0 of 1 cases done" in text
    assert _current(agent) == 2
    with tenancy.agency_context(tenant_a.agency.id):
        held = AgentVersion.objects.select_related("restored_from").get(agent=agent, number=3)
        assert held.restored_from is not None
        assert held.restored_from.number == 1
        assert held.config["description"] == ""
        assert Agent.objects.get(pk=agent.pk).description == "Second."
        experiment = Experiment.objects.get(agent=agent, kind=ExperimentKind.GATE)
    assert (experiment.agent_version_id, experiment.min_pass_rate) == (held.pk, 1)
    # A switch saved meanwhile makes no version and leaves version 3 waiting.
    with tenancy.agency_context(tenant_a.agency.id):
        agent_update(agent=Agent.objects.get(pk=agent.pk), is_public=True)
        assert AgentVersion.objects.filter(agent=agent).count() == 3
    assert _current(agent) == 2
    # Switched off, a gated agent's configuration cannot change: its cases could not run.
    with tenancy.agency_context(tenant_a.agency.id):
        off = agent_update(agent=Agent.objects.get(pk=agent.pk), is_active=False)
        with pytest.raises(ApplicationError, match="cannot run while the agent is inactive"):
            agent_update(agent=off, description="Third.")


def test_the_gates_are_the_setting_s_dotted_paths(tenant_a: Tenant) -> None:
    """AGENTDESK_VERSION_GATES names what holds a version: without evals' gate in it an agent
    with an active deploy gate saves as usual; a path that is not a gate is a configuration
    error, not a save that skips it."""
    agent = _api_agent(tenant_a, "Alex", is_active=True)
    with tenancy.agency_context(tenant_a.agency.id):
        dataset = dataset_create(
            agency_id=tenant_a.agency.id, name="Cases", agent=agent, user_id=None
        )
        dataset_case_add(
            dataset=dataset,
            case={"name": "Hi", "input": "Hello.", "expectations": {"final_status": "completed"}},
            user_id=None,
        )
        deploy_gate_set(agent=agent, dataset=dataset, min_pass_rate="1")
        with override_settings(AGENTDESK_VERSION_GATES=[]):
            agent_update(agent=Agent.objects.get(pk=agent.pk), description="Ungated.")
        assert _current(agent) == 2
        assert not Experiment.objects.filter(agent=agent, kind=ExperimentKind.GATE).exists()

        agent_update(agent=Agent.objects.get(pk=agent.pk), description="Gated.")
        assert _current(agent) == 2  # version 3 is held by the default setting's gate
        assert Experiment.objects.filter(agent=agent, kind=ExperimentKind.GATE).count() == 1

        with (
            override_settings(AGENTDESK_VERSION_GATES=["evals.models.DeployGate"]),
            pytest.raises(ImproperlyConfigured, match="AGENTDESK_VERSION_GATES"),
        ):
            agent_update(agent=Agent.objects.get(pk=agent.pk), description="Broken.")
