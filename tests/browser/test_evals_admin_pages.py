"""The evaluation admin pages a review found rough (issue 28), in Chromium at 1440 and 390 px
against the real ASGI server, a real Celery worker and the demo model: the empty test case list
says what appears there; a case written by hand is refused with the fault on its field, then
added; the dataset page lists its cases and versions and runs an experiment, whose page shows
its progress and then each case's checks, steps, tokens, cost and latency; a case's recorded
calls and expectations read indented, and "Saved from run" opens the run. Screenshots in
.data/screenshots/e3-*, none scrolling sideways on a phone."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, expect

from core import tenancy
from core.models import Agency, Role
from evals.models import Dataset, Experiment, TestCase
from tests.admin.conftest import member
from tests.browser.conftest import logged_in, look_at_both_widths
from tests.evals.test_experiments import (  # noqa: F401 - fixtures
    ASK,
    _agent,
    _dataset_of,
    _run,
    demo_agency,
    demo_model,
)
from tests.processes import AsgiServer, Worker

pytestmark = pytest.mark.slow


def test_staff_write_a_case_and_run_an_experiment_from_the_dataset_page(
    browser: Browser,
    asgi_server: AsgiServer,
    demo_agency: Agency,  # noqa: F811 - the fixture imported above
    celery_worker: Worker,
) -> None:
    page = logged_in(browser, asgi_server, member(demo_agency, Role.STAFF)).new_page()
    admin = f"{asgi_server.url}/admin/evals"
    page.goto(f"{admin}/testcase/")
    expect(page.get_by_role("heading", name="No test case yet")).to_be_visible()
    look_at_both_widths(page, "e3-testcases-empty")

    alex = _agent(demo_agency, "alex")
    run = _run(alex, ASK)
    dataset = _dataset_of(run, alex)

    page.goto(f"{admin}/testcase/add/?dataset={dataset.pk}")
    page.get_by_label("Name").fill("Greets Marcus")
    page.get_by_label("Input").fill("Say hello to Marcus Oyelaran.")
    page.get_by_label("Expectations").fill('{"must_call": "crm_*"}')
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.get_by_text("expectations.must_call: a list of tool-name patterns")).to_be_visible()
    look_at_both_widths(page, "e3-testcase-add-error")
    page.get_by_label("Expectations").fill('{"max_steps": 3, "final_status": "completed"}')
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.get_by_text(f"Saved as version 3 of {dataset.name}.")).to_be_visible()

    page.goto(f"{admin}/dataset/{dataset.pk}/change/")
    expect(page.get_by_role("link", name="Greets Marcus")).to_be_visible()
    expect(page.get_by_text("Expects: at most 3 steps; ends completed")).to_be_visible()
    expect(page.get_by_role("link", name="Version 3")).to_be_visible()
    look_at_both_widths(page, "e3-dataset")

    page.get_by_role("link", name="Run experiment").click()
    expect(page.get_by_role("heading", name="Run experiment")).to_be_visible()
    look_at_both_widths(page, "e3-run-experiment")
    page.get_by_role("button", name="Run the experiment").click()
    expect(page.get_by_text("Experiment started: 2 case(s).")).to_be_visible()
    with tenancy.agency_context(demo_agency.id):
        experiment = Experiment.objects.get(agency=demo_agency)
    assert page.url.endswith(f"/admin/evals/experiment/{experiment.pk}/change/")
    expect(page.get_by_text("cases done")).to_be_visible()
    # The page reloads itself while the experiment runs.
    expect(page.get_by_text("2 of 2 cases done", exact=True)).to_be_visible(timeout=90_000)
    expect(page.get_by_text("must call crm_add_note")).to_be_visible()
    look_at_both_widths(page, "e3-experiment")
    page.goto(f"{admin}/experiment/")
    expect(page.get_by_role("link", name="Alex")).to_be_visible()
    assert page.locator('a[href$="/experiment/add/"]').count() == 0  # started, never "added"
    look_at_both_widths(page, "e3-experiments")

    with tenancy.agency_context(demo_agency.id):  # the saved run's case, in version 3
        current = Dataset.objects.get(pk=dataset.pk).current_version
        case = TestCase.objects.get(version=current, source_execution_id=run.pk)
    page.goto(f"{admin}/testcase/{case.pk}/change/")
    calls = page.get_by_label("Recorded calls").input_value()
    assert calls.startswith('[\n  {\n    "tool": "crm_search_contacts",')
    look_at_both_widths(page, "e3-testcase")
    page.get_by_role("link", name=str(run.pk)[:8]).click()
    assert page.url.endswith(f"/admin/agents/execution/{run.pk}/change/")
