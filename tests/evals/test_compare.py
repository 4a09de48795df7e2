"""The experiments' results (issue 28): two versions' experiments of one dataset side by side
(figures, the better one marked; each case's outcome per version; the trend), the same in the
admin's results page and over the API; another dataset's or another agency's experiment is
refused."""

from __future__ import annotations

import html
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from agents.models import AgentVersion, ExecutionStatus
from core import tenancy
from core.models import Agency, Role, User
from evals.compare import percentile
from evals.models import Dataset, Experiment, ExperimentResult, ExperimentStatus, TestCase
from tests.admin.helpers import admin_url
from tests.agents.factories import AgentFactory, ExecutionFactory
from tests.api.conftest import Tenant, token_client
from tests.evals.factories import (
    DatasetFactory,
    DatasetVersionFactory,
    ExperimentFactory,
    TestCaseFactory,
)
from tests.tools.factories import ToolCallFactory

pytestmark = pytest.mark.django_db
FAILED = {"check": "must call crm_add_note", "passed": False, "detail": "not called"}
PASSED = {"check": "ends completed", "passed": True, "detail": ""}


def _result(experiment: Experiment, case: TestCase, **values: Any) -> ExperimentResult:
    run = ExecutionFactory.create(
        agent=experiment.agent, status=ExecutionStatus.COMPLETED, output=values.pop("output", "")
    )
    for tool, arguments in values.pop("calls", []):
        ToolCallFactory.create(
            execution=run, tool=None, tool_name=tool, input=arguments, status="completed"
        )
    return ExperimentResult.objects.create(
        agency=experiment.agency, experiment=experiment, case=case, execution=run, **values
    )


def two_versions(agency: Agency) -> tuple[Dataset, Experiment, Experiment]:
    """Version 1 passes both cases, slower and dearer; version 2 fails the second."""
    with tenancy.agency_context(agency.id):
        return _two_versions(agency)


def _two_versions(agency: Agency) -> tuple[Dataset, Experiment, Experiment]:
    agent = AgentFactory.create(agency=agency, name="Alex")
    v1, v2 = (
        AgentVersion.objects.create(agency=agency, agent=agent, number=n, config={}) for n in (1, 2)
    )
    dataset = DatasetFactory.create(agency=agency, agent=agent, name="Alex's cases")
    version = DatasetVersionFactory.create(dataset=dataset, number=1)
    dataset.current_version = version
    dataset.save(update_fields=["current_version"])
    find, note = (
        TestCaseFactory.create(version=version, name=name, position=i)
        for i, name in enumerate(["Finds Marcus", "Adds a note"], start=1)
    )
    made = []
    for agent_version in (v1, v2):
        made.append(
            ExperimentFactory.create(
                dataset_version=version, agent=agent, agent_version=agent_version,
                status=ExperimentStatus.COMPLETED, case_count=2, finished_at=timezone.now(),
            )
        )  # fmt: skip
    first, second = made
    search = ("crm_search_contacts", {"query": "Marcus"})
    _result(first, find, status="passed", checks=[PASSED], latency_ms=1000, steps=3,
            tokens_total=300, cost_usd=Decimal("0.002"), judge_score=0.8, calls=[search],
            output="Found Marcus Oyelaran.")  # fmt: skip
    _result(first, note, status="passed", checks=[PASSED], latency_ms=3000, steps=5,
            tokens_total=500, cost_usd=Decimal("0.004"), judge_score=0.8,
            calls=[search, ("crm_add_note", {"body": "Demo follow-up"})])  # fmt: skip
    _result(second, find, status="passed", checks=[PASSED], latency_ms=800, steps=2,
            tokens_total=200, cost_usd=Decimal("0.001"), judge_score=0.9,
            calls=[search])  # fmt: skip
    _result(second, note, status="failed", checks=[FAILED, PASSED], latency_ms=1200, steps=2,
            tokens_total=250, cost_usd=Decimal("0.001"), judge_score=0.4, calls=[search],
            output="I could not add the note.")  # fmt: skip
    return dataset, first, second


def test_percentile_is_the_nearest_rank() -> None:
    assert percentile([], 0.5) is None
    assert percentile([1000, 3000], 0.5) == 1000
    assert percentile([1000, 3000], 0.95) == 3000
    assert percentile(list(range(1, 101)), 0.95) == 95


def test_the_api_compares_two_versions_with_the_better_figures_marked(
    tenant_a: Tenant, tenant_b: Tenant
) -> None:
    dataset, first, second = two_versions(tenant_a.agency)
    client = token_client(tenant_a.users[Role.VIEWER])

    response = client.get(f"/api/v1/experiments/compare/?ids={first.pk},{second.pk}")

    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["dataset"] == str(dataset.pk)
    one, two = body["experiments"]
    assert (one["label"], one["agent_version"], two["label"]) == ("Version 1", 1, "Version 2")
    assert (one["pass_rate"], one["cost_per_case_usd"], one["latency_p50_ms"]) == (
        1.0, "0.003000", 1000,
    )  # fmt: skip
    assert (one["latency_p95_ms"], one["steps_mean"], one["tokens_mean"]) == (3000, 4.0, 400.0)
    assert (two["pass_rate"], two["cost_per_case_usd"], two["latency_p95_ms"]) == (
        0.5, "0.001000", 1200,
    )  # fmt: skip
    assert one["judge_score_mean"] == pytest.approx(0.8)
    assert two["judge_score_mean"] == pytest.approx(0.65)
    assert one["best"] == ["judge_score_mean", "pass_rate"]
    assert two["best"] == [
        "cost_per_case_usd", "latency_p50_ms", "latency_p95_ms", "steps_mean", "tokens_mean",
    ]  # fmt: skip
    finds, notes = body["cases"]
    assert (finds["name"], finds["differs"], notes["name"], notes["differs"]) == (
        "Finds Marcus", False, "Adds a note", True,
    )  # fmt: skip
    passed, failed = notes["outcomes"]
    assert (passed["status"], passed["failed_checks"]) == ("passed", [])
    assert [c["tool"] for c in passed["calls"]] == ["crm_search_contacts", "crm_add_note"]
    assert passed["calls"][1]["arguments"] == '{"body": "Demo follow-up"}'
    assert (failed["status"], failed["failed_checks"]) == ("failed", [FAILED])
    assert failed["output"] == "I could not add the note."
    assert failed["execution"] is not None
    assert [t["id"] for t in body["trend"]] == [str(first.pk), str(second.pk)]

    # Refused: one experiment (or one twice), an id that is none, another dataset's (a 422:
    # the query matches the schema), another agency's.
    with tenancy.agency_context(first.agency_id):
        other = ExperimentFactory.create(
            agent=first.agent, dataset_version__dataset__agency=first.agency
        )
    _, theirs, _ = two_versions(tenant_b.agency)
    for ids, status, code in (
        (f"{first.pk}", 400, "invalid_comparison"),
        ("nope,also-not", 400, "invalid_comparison"),
        (f"{first.pk},{first.pk}", 422, "invalid_comparison"),
        (f"{first.pk},{other.pk}", 422, "invalid_comparison"),
        (f"{first.pk},{theirs.pk}", 404, "not_found"),
    ):
        refused = client.get(f"/api/v1/experiments/compare/?ids={ids}")
        assert (refused.status_code, refused.json()["code"]) == (status, code), ids


def test_the_admins_results_page_shows_versions_cases_and_trend(
    agency: Agency, staff: User, login: Callable[[User], Client]
) -> None:
    dataset, first, second = two_versions(agency)
    client = login(staff)
    picked = client.post(
        admin_url(Experiment, "changelist"),
        {"action": "compare", "_selected_action": [str(first.pk), str(second.pk)], "index": "0"},
    )
    assert picked.status_code == 302
    assert picked["Location"].startswith("/admin/evals/experiment/compare/?ids=")

    page = client.get(picked["Location"])

    assert page.status_code == 200
    text = html.unescape(page.content.decode())
    assert "Compare experiments: Alex's cases" in text
    assert text.count('class="compare-best"') == 7  # 2 figures of v1, 5 of v2
    assert "✗ must call crm_add_note" in text
    assert 'crm_add_note({"body": "Demo follow-up"})' in text
    assert "I could not add the note." in text
    assert text.count('data-type="line"') == 2  # pass rate and cost per case over time
    # "Compare versions" on the dataset's page: its last experiment of each version.
    dataset_page = client.get(admin_url(Dataset, "compare_versions", dataset.pk))
    assert dataset_page.status_code == 302
    assert dataset_page["Location"] == f"/admin/evals/experiment/compare/?dataset={dataset.pk}"
    latest = html.unescape(client.get(dataset_page["Location"]).content.decode())
    assert latest.count('class="compare-best"') == 7
    assert f'href="/admin/evals/experiment/{second.pk}/change/">Version 2</a>' in latest
