"""The experiments' results page in Chromium (issue 28: "two versions' experiment results side
by side in headless Chromium at 1440 and 390 px"): a case saved from a real demo run, run on the
real worker against the agent's version 1 (it passes) and, after task_create is taken away, its
version 2 (it fails); the dataset's "Compare versions" shows both side by side, the better
figures marked, the case's outcome per version (the check version 2 failed, what each called
and answered, each run linked) and the pass rate and cost per case over time. Screenshots
(.data/screenshots/e5-*; the README's: docs/img/evals-compare*.png), no sideways scroll on a
phone. And the test case pages two defects touched: an older version's case reads only and
links the current one; deleting a case confirms it makes a new version without it."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from agents.services import agent_update
from core import tenancy
from core.models import Agency, Role
from evals.models import TestCase
from evals.services.datasets import dataset_case_change
from tests.admin.conftest import member
from tests.browser.conftest import agency_member, logged_in, look_at_both_widths
from tests.evals.test_admin import _dataset_with_a_case
from tests.evals.test_experiments import (  # noqa: F401 - fixtures
    ASK,
    _agent,
    _dataset_of,
    _experiment,
    _run,
    demo_agency,
    demo_model,
)
from tests.processes import AsgiServer, Worker

pytestmark = pytest.mark.slow


def test_two_versions_results_side_by_side(
    browser: Browser,
    asgi_server: AsgiServer,
    demo_agency: Agency,  # noqa: F811 - the fixture imported above
    celery_worker: Worker,
) -> None:
    alex = _agent(demo_agency, "alex")
    dataset = _dataset_of(_run(alex, ASK), alex)
    passing = _experiment(alex, dataset)
    with tenancy.agency_context(demo_agency.id):
        agent_update(agent=alex, denied_tools=["task_create"])
    failing = _experiment(alex, dataset)
    assert (passing.passed_count, failing.passed_count) == (1, 0)

    page = logged_in(browser, asgi_server, member(demo_agency, Role.STAFF)).new_page()
    page.goto(f"{asgi_server.url}/admin/evals/dataset/{dataset.pk}/change/")
    page.get_by_role("link", name="Compare versions").click()

    expect(page.get_by_role("heading", name=f"Compare experiments: {dataset.name}")).to_be_visible()
    figures = page.locator("#compare-figures")
    expect(figures.get_by_role("link", name="Version 1")).to_be_visible()
    expect(figures.get_by_role("link", name="Version 2")).to_be_visible()
    pass_rate = figures.get_by_role("row", name="Pass rate")
    expect(pass_rate.locator("td")).to_have_text(["100%", "0%"])
    expect(pass_rate.locator("td.compare-best")).to_have_text("100%")
    case = page.locator(".compare-case")
    expect(case.get_by_text("differs")).to_be_visible()
    two = case.locator(".compare-outcome").nth(1)
    expect(two.get_by_text("✗ must call task_create")).to_be_visible()
    expect(two.locator(".compare-chip")).to_have_text("Failed")
    one = case.locator(".compare-outcome").nth(0)
    expect(one.get_by_text("task_create(", exact=False)).to_be_visible()
    one.get_by_text("Answer").click()
    expect(one.locator("pre")).not_to_be_empty()
    expect(page.locator("canvas.chart")).to_have_count(2)
    look_at_both_widths(page, "e5-compare")

    one.get_by_role("link", name="Run ").click()
    assert "/admin/agents/execution/" in page.url


def test_an_older_versions_case_reads_only_and_a_delete_makes_a_new_version(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agency, staff = agency_member(Role.STAFF)
    dataset = _dataset_with_a_case(agency)
    with tenancy.agency_context(agency.id):
        old = TestCase.objects.get(version=dataset.current_version)
        dataset_case_change(
            dataset=dataset, key=str(old.key), changes={"input": "Hello."}, user_id=None
        )
        current = TestCase.objects.get(version=dataset.current_version)
    page = logged_in(browser, asgi_server, staff).new_page()
    admin = f"{asgi_server.url}/admin/evals/testcase"

    page.goto(f"{admin}/{old.pk}/change/")
    expect(page.get_by_text("This case belongs to version 2 of Alex's cases")).to_be_visible()
    expect(page.get_by_role("button", name="Save", exact=True)).to_have_count(0)
    look_at_both_widths(page, "e5-case-older-version")
    page.get_by_role("link", name="open it in the current version").click()
    assert page.url.endswith(f"/testcase/{current.pk}/change/")

    page.get_by_role("link", name="Delete").click()
    expect(page.get_by_text("left out of a new version of Alex's cases")).to_be_visible()
    look_at_both_widths(page, "e5-case-delete")
    page.get_by_role("button", name="Yes, I").click()  # (Django writes I\u2019m)
    expect(page.get_by_text("Saved as version 4 of Alex's cases, without")).to_be_visible()
