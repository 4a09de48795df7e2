"""The headline of issue 28, through real workers and the demo model (the scripted provider on
loopback): a case saved from a real run replays on the same version and passes; a call its
recording lacks is refused, never run (no note, no task, no e-mail, no approval); a version
without a tool the case needs fails, and ``manage.py eval run`` exits non-zero for it and zero
for the version that passes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest

from agents.models import AfterRunWork, Agent, Execution, ExecutionStatus
from agents.selectors import agent_run_counts
from agents.services import agent_update, execution_create
from approvals.models import Approval
from approvals.services import approval_decide
from core import tenancy
from core.models import Agency, Role
from crm.models import EmailMessage, Note, Task
from devkit.demo import demo_data_seed
from devkit.fake_server.demo import DemoModelServer
from evals.models import Dataset, Experiment, ExperimentResult, ExperimentStatus, TestCase
from evals.services.cases import case_save_from_execution
from evals.services.datasets import dataset_case_change, dataset_create
from evals.services.experiments import experiment_start
from evals.tool_gate import UNRECORDED
from memory.models import Episode, LearnedPattern, RunQuality
from tests.api.conftest import token_client
from tests.factories import AgencyFactory, MembershipFactory, SiteFactory
from tests.processes import ROOT, Worker, wait_for
from tools.models import ToolCall
from usage.models import UsageDaily

pytestmark = pytest.mark.slow
ASK = "Follow up with Marcus Oyelaran about his demo."


@pytest.fixture(scope="module")
def demo_model() -> Iterator[DemoModelServer]:
    with DemoModelServer(think_seconds=0, stream_interval=0) as server:
        yield server


@pytest.fixture
def demo_agency(live_db: None, demo_model: DemoModelServer) -> Agency:
    agency = AgencyFactory.create()
    SiteFactory.create(agency=agency)
    demo_data_seed(agency=agency, model_url=demo_model.openai_base_url)
    return agency


def _agent(agency: Agency, slug: str) -> Agent:
    with tenancy.agency_context(agency.id):
        return Agent.objects.get(agency=agency, slug=slug)


def _run(agent: Agent, text: str, statuses: set[str] | None = None) -> Execution:
    with tenancy.agency_context(agent.agency_id):
        execution = execution_create(agent=agent, input=text)
    assert execution is not None
    return wait_for(execution, statuses) if statuses else wait_for(execution)


def _dataset_of(run: Execution, agent: Agent) -> Dataset:
    with tenancy.agency_context(agent.agency_id):
        dataset = dataset_create(
            agency_id=agent.agency_id, name=f"{agent.slug} cases", agent=agent, user_id=None
        )
        case_save_from_execution(execution=run, dataset=dataset, user_id=None)
        return Dataset.objects.select_related("current_version").get(pk=dataset.pk)


def _experiment(agent: Agent, dataset: Dataset, version: int | None = None) -> Experiment:
    with tenancy.agency_context(agent.agency_id):
        assert dataset.current_version is not None
        started = experiment_start(
            agent=agent, dataset_version=dataset.current_version, version_number=version
        )
    deadline = time.monotonic() + 90
    while True:
        with tenancy.agency_context(agent.agency_id):
            experiment = Experiment.objects.get(pk=started.pk)
        if experiment.status == ExperimentStatus.COMPLETED:
            return experiment
        assert time.monotonic() < deadline, "experiment still running"
        time.sleep(0.2)


def _writes(agency: Agency) -> tuple[int, int, int, int]:
    with tenancy.agency_context(agency.id):
        return (
            Note.objects.count(),
            Task.objects.count(),
            EmailMessage.objects.count(),
            Approval.objects.count(),
        )


def _result(experiment: Experiment) -> ExperimentResult:
    with tenancy.agency_context(experiment.agency_id):
        return ExperimentResult.objects.select_related("execution").get(experiment=experiment)


def _calls(execution_id: uuid.UUID | None, agency: Agency) -> list[tuple[str, str, str]]:
    assert execution_id is not None
    with tenancy.agency_context(agency.id):
        return list(
            ToolCall.objects.filter(execution_id=execution_id)
            .order_by("created_at")
            .values_list("tool_name", "status", "error_code")
        )


def test_a_case_saved_from_a_demo_run_replays_on_a_worker_and_passes_writing_nothing(
    demo_agency: Agency, celery_worker: Worker
) -> None:
    alex = _agent(demo_agency, "alex")
    run = _run(alex, ASK)
    assert run.status == ExecutionStatus.COMPLETED, run.error
    dataset = _dataset_of(run, alex)
    before = _writes(demo_agency)

    experiment = _experiment(alex, dataset)

    result = _result(experiment)
    assert result.status == "passed", result.checks
    assert [c["check"] for c in result.checks] == [
        "must call crm_search_contacts",
        "must call crm_get_contact",
        "must call crm_add_note",
        "must call task_create",
        "ends completed",
    ]
    assert result.unrecorded_calls == 0
    assert result.execution is not None
    assert result.execution.agent_version_id == run.agent_version_id
    assert (result.steps, result.tokens_total > 0, result.latency_ms is not None) == (
        run.llm_call_count,
        True,
        True,
    )
    assert experiment.passed_count == experiment.case_count == 1
    # Every call answered from the recording: the note and the task were not written again.
    assert _writes(demo_agency) == before
    assert [name for name, _, _ in _calls(result.execution_id, demo_agency)] == [
        "crm_search_contacts", "crm_get_contact", "crm_add_note", "task_create",
    ]  # fmt: skip


def test_an_unrecorded_call_is_refused_and_no_email_leaves(
    demo_agency: Agency, celery_worker: Worker
) -> None:
    sdr = _agent(demo_agency, "sdr-agent")
    asked = _run(sdr, "Reach out to Priya Raman about her pricing question.", {"waiting_approval"})
    with tenancy.agency_context(demo_agency.id):
        approval = Approval.objects.get(execution=asked)
        approval_decide(approval=approval, approve=True, user_id=None, reason="Fine.")
    run = wait_for(asked)
    assert run.status == ExecutionStatus.COMPLETED, run.error
    dataset = _dataset_of(run, sdr)
    with tenancy.agency_context(demo_agency.id):
        case = TestCase.objects.get(version=dataset.current_version)
        assert [c["tool"] for c in case.recorded_calls][-1] == "email_send"
        # The recording without the e-mail: the replayed run's e-mail has no recorded reply.
        dataset_case_change(
            dataset=dataset,
            key=str(case.key),
            changes={"recorded_calls": case.recorded_calls[:-1]},
            user_id=None,
        )
        dataset.refresh_from_db()
    before = _writes(demo_agency)

    experiment = _experiment(sdr, dataset)

    result = _result(experiment)
    calls = _calls(result.execution_id, demo_agency)
    assert ("email_send", "denied", UNRECORDED) in calls, calls
    assert result.unrecorded_calls == 1
    assert result.status == "failed"
    assert {c["check"]: c["passed"] for c in result.checks}["must call email_send"] is False
    # Nothing written to the CRM, no e-mail queued or sent, no approval asked.
    assert _writes(demo_agency) == before


def test_a_version_without_a_needed_tool_fails_and_the_command_exits_non_zero(
    demo_agency: Agency, celery_worker: Worker
) -> None:
    alex = _agent(demo_agency, "alex")
    run = _run(alex, ASK)
    dataset = _dataset_of(run, alex)
    with tenancy.agency_context(demo_agency.id):
        passing = alex.current_version
        assert passing is not None
        agent_update(agent=alex, denied_tools=["task_create"])
    arguments = ["run", "--agent", str(alex.pk), "--dataset", dataset.name, "--min-pass", "0.9"]

    failed = _command(*arguments)
    assert failed.returncode == 1, failed.stderr
    assert "FAILED" in failed.stdout
    assert "failed: must call task_create" in failed.stdout
    assert "Passed 0/1 (0%); needed 90%" in failed.stdout
    assert "Below the pass rate needed." in failed.stderr

    passed = _command(*arguments, "--version", str(passing.number))
    assert passed.returncode == 0, passed.stderr
    assert "Passed 1/1 (100%)" in passed.stdout


def _command(*arguments: str) -> subprocess.CompletedProcess[str]:
    """``manage.py eval`` as a CI pipeline runs it: its own process, its exit status."""
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test"}
    environment.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    return subprocess.run(
        [sys.executable, "manage.py", "eval", *arguments, "--timeout", "120"],
        cwd=ROOT, env=environment, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_an_experiment_started_over_the_api_is_read_back_with_each_cases_score(
    demo_agency: Agency, celery_worker: Worker
) -> None:
    alex = _agent(demo_agency, "alex")
    run = _run(alex, ASK)
    dataset = _dataset_of(run, alex)
    client = token_client(MembershipFactory.create(agency=demo_agency, role=Role.STAFF).user)

    response = client.post(
        "/api/v1/experiments/",
        {"agent": str(alex.pk), "dataset": str(dataset.pk), "version": 1},
        format="json",
    )

    assert response.status_code == 201, response.json()
    started = response.json()
    assert (started["status"], started["agent_version"], started["case_count"]) == ("running", 1, 1)
    deadline = time.monotonic() + 90
    while (read := client.get(f"/api/v1/experiments/{started['id']}/").json())[
        "status"
    ] != "completed":
        assert time.monotonic() < deadline, read
        time.sleep(0.2)
    assert read["pass_rate"] == 1.0
    [result] = read["results"]
    assert result["status"] == "passed"
    assert all(check["passed"] for check in result["checks"])
    assert result["unrecorded_calls"] == 0
    response = client.post(
        "/api/v1/experiments/",
        {"agent": str(alex.pk), "dataset": str(dataset.pk), "version": 99},
        format="json",
    )
    assert (response.status_code, response.json()["code"]) == (422, "no_such_version")


def _after_run_done(execution: Execution) -> None:
    """The run's after-run work is done (its rows are deleted once it is; none if it had none)."""
    deadline = time.monotonic() + 60
    while True:
        with tenancy.agency_context(execution.agency_id):
            if not AfterRunWork.objects.filter(execution_id=execution.pk).exists():
                return
        assert time.monotonic() < deadline, "after-run work still not done"
        time.sleep(0.2)


def _learned(agent: Agent) -> list[tuple[uuid.UUID, int, int, list[uuid.UUID]]]:
    with tenancy.agency_context(agent.agency_id):
        return list(
            LearnedPattern.objects.filter(agent=agent)
            .order_by("pk")
            .values_list("pk", "success_count", "failure_count", "source_executions")
        )


def _usage(agent: Agent) -> dict[str, tuple[int, object]]:
    with tenancy.agency_context(agent.agency_id):
        rows = UsageDaily.objects.filter(agent_id=agent.pk).values_list(
            "purpose", "agent_runs", "cost_usd"
        )
        return {purpose: (runs, cost) for purpose, runs, cost in rows}


def test_an_experiments_run_is_none_of_the_agents_runs_and_teaches_it_nothing(
    demo_agency: Agency, celery_worker: Worker
) -> None:
    alex = _agent(demo_agency, "alex")
    run = _run(alex, ASK)
    assert run.status == ExecutionStatus.COMPLETED, run.error
    _after_run_done(run)
    with tenancy.agency_context(demo_agency.id):
        # A run of the agent's: counted, remembered, scored.
        assert Episode.objects.filter(execution_id=run.pk).exists()
        assert RunQuality.objects.filter(execution_id=run.pk).exists()
        alex.refresh_from_db()
    assert (alex.total_runs, run.purpose) == (1, "run")
    dataset = _dataset_of(run, alex)
    learned, usage = _learned(alex), _usage(alex)
    assert usage["run"][0] == 1

    experiment = _experiment(alex, dataset)

    evaluated = _result(experiment).execution
    assert evaluated is not None
    assert (evaluated.status, evaluated.purpose) == (ExecutionStatus.COMPLETED, "evaluation")
    with tenancy.agency_context(demo_agency.id):
        assert not AfterRunWork.objects.filter(execution_id=evaluated.pk).exists()
    _after_run_done(evaluated)
    with tenancy.agency_context(demo_agency.id):
        alex.refresh_from_db()
        assert not Episode.objects.filter(execution_id=evaluated.pk).exists()
        assert not RunQuality.objects.filter(execution_id=evaluated.pk).exists()
        counts = agent_run_counts(agent=alex)
    assert alex.total_runs == 1
    assert counts.total == 1  # the agent's "Runs & stats"
    assert _learned(alex) == learned
    # Its usage on a row of its own: real spend, but no run of the agent's.
    assert _usage(alex) == {**usage, "evaluation": (1, evaluated.cost_usd)}
