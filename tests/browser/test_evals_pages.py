"""Evaluations in the browser (issue 28): on an ended run's page, "Save as a test case" opens a
form that saves the run into one of its agent's datasets and lands on the new case; the case,
the datasets list and an experiment's page read well at 1440 and 390 px, with no sideways
scroll on a phone. Screenshots in .data/screenshots/e1-*."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

from django.utils import timezone
from playwright.sync_api import Browser, expect

from agents.models import ExecutionStatus
from core import tenancy
from core.models import Role
from evals.models import ExperimentResult, ExperimentStatus, ResultStatus, TestCase
from evals.services.datasets import dataset_create
from tests.admin.conftest import member
from tests.agents.factories import AgentFactory, ExecutionFactory
from tests.browser.conftest import logged_in, look_at_both_widths
from tests.evals.factories import ExperimentFactory
from tests.factories import AgencyFactory
from tests.processes import AsgiServer
from tests.tools.factories import ToolCallFactory


def test_an_ended_run_is_saved_as_a_test_case_from_its_page(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agency = AgencyFactory.create(slug=f"evals-{uuid.uuid4().hex[:8]}")
    agent = AgentFactory.create(agency=agency, name="Alex")
    execution = ExecutionFactory.create(
        agent=agent,
        status=ExecutionStatus.COMPLETED,
        input="Follow up with Marcus Oyelaran about his demo.",
        output="Logged a note and a follow-up task for Marcus Oyelaran.",
        completed_at=timezone.now(),
        tool_call_count=1,
    )
    ToolCallFactory.create(
        execution=execution, tool=None, tool_name="crm_search_contacts", status="completed",
        input={"query": "Marcus Oyelaran"}, output={"count": 1},
    )  # fmt: skip
    with tenancy.agency_context(agency.id):
        dataset = dataset_create(
            agency_id=agency.id, name="Alex's cases", agent=agent, user_id=None
        )
    page = logged_in(browser, asgi_server, member(agency, Role.STAFF)).new_page()

    page.goto(f"{asgi_server.url}/admin/agents/execution/{execution.pk}/change/")
    button = page.get_by_role("link", name="Save as a test case")
    expect(button).to_be_visible()
    look_at_both_widths(
        page, "e1-run-page", phone_fits=False
    )  # (the run page itself is another's work)
    button.click()
    expect(page.get_by_role("heading", name="Save as a test case")).to_be_visible()
    page.get_by_label("Dataset").select_option(label="Alex's cases")
    look_at_both_widths(page, "e1-save-case-form")
    page.get_by_role("button", name="Save the test case").click()

    expect(page.get_by_text("Saved as a test case: Alex's cases, version 2.")).to_be_visible()
    look_at_both_widths(page, "e1-test-case")
    with tenancy.agency_context(agency.id):
        case = TestCase.objects.select_related("version").get(version__dataset=dataset)
    assert case.source_execution_id == execution.pk
    assert case.recorded_calls[0]["tool"] == "crm_search_contacts"
    assert page.url.endswith(f"/admin/evals/testcase/{case.pk}/change/")

    page.goto(f"{asgi_server.url}/admin/evals/dataset/")
    expect(page.get_by_role("link", name="Alex's cases")).to_be_visible()
    look_at_both_widths(page, "e1-datasets")

    experiment = ExperimentFactory.create(
        agent=agent, agency=agency, dataset_version=case.version, status=ExperimentStatus.COMPLETED,
        passed_count=1, cost_usd=Decimal("0.0007"), tokens_total=3971,
    )  # fmt: skip
    with tenancy.agency_context(agency.id):
        ExperimentResult.objects.create(
            agency=agency, experiment=experiment, case=case, execution=execution,
            status=ResultStatus.PASSED, steps=4, tokens_total=3971, cost_usd=Decimal("0.0007"),
            latency_ms=441, checks=[
                {"check": "must call crm_search_contacts", "passed": True, "detail": ""},
                {"check": "ends completed", "passed": True, "detail": "ended completed"},
            ],
        )  # fmt: skip
    page.goto(f"{asgi_server.url}/admin/evals/experiment/{experiment.pk}/change/")
    expect(page.get_by_text("must call crm_search_contacts")).to_be_visible()
    look_at_both_widths(page, "e1-experiment")
