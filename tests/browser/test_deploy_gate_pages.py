"""The deploy gate in Chromium (issue 28) against the real ASGI server, a real Celery worker and
the demo model, at 1440 and 390 px: the agent page offers to set a gate, the gate's form takes
the agent's dataset, a save of the editor waits for the gate (the page says which version runs
meanwhile) and then shows the failure naming the failed case; a draft with a fault is listed,
not run. Screenshots (.data/screenshots/e6-*), none scrolling sideways on a phone."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import Browser, Page, expect

from core import tenancy
from core.models import Agency, Role
from evals.models import Experiment, ExperimentKind, ExperimentStatus
from tests.admin.conftest import member
from tests.browser.conftest import logged_in, look_at_both_widths
from tests.browser.test_agent_stats_and_versions import _tab
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


def _look(page: Page, name: str) -> None:
    look_at_both_widths(page, f"e6-{name}")


def test_a_gated_save_waits_then_shows_the_failed_case_and_a_bad_draft_is_listed(
    browser: Browser,
    asgi_server: AsgiServer,
    demo_agency: Agency,  # noqa: F811 - the fixture imported above
    celery_worker: Worker,
) -> None:
    alex = _agent(demo_agency, "alex")
    dataset = _dataset_of(_run(alex, ASK), alex)
    page = logged_in(browser, asgi_server, member(demo_agency, Role.STAFF)).new_page()
    editor = f"{asgi_server.url}/admin/agents/agent/{alex.pk}/change/"
    page.goto(editor)
    expect(page.get_by_text("No deploy gate: a saved change is current at once.")).to_be_visible()
    _look(page, "agent-no-gate")

    page.get_by_role("link", name="Set a deploy gate").click()
    page.get_by_label("Dataset").select_option(str(dataset.pk))
    page.get_by_label("Pass rate needed").fill("0.9")
    _look(page, "gate-form")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.get_by_text("was added successfully")).to_be_visible()

    page.goto(editor)
    expect(page.get_by_text("a new version becomes current once it passes 90%")).to_be_visible()
    _tab(page, "Tools & policies")
    page.locator("#id_denied_tools").fill("task_create")
    page.locator("button[name=_continue]").first.click()
    expect(page.get_by_text("awaiting the deploy gate")).to_be_visible()
    _look(page, "agent-awaiting-gate")

    with tenancy.agency_context(demo_agency.id):
        gate = Experiment.objects.get(agent=alex, kind=ExperimentKind.GATE)
    deadline = time.monotonic() + 90
    while True:
        with tenancy.agency_context(demo_agency.id):
            gate.refresh_from_db()
        if gate.status == ExperimentStatus.COMPLETED:
            break
        assert time.monotonic() < deadline, "gate experiment still running"
        time.sleep(0.3)
    page.goto(editor)
    expect(page.get_by_text("failed the deploy gate")).to_be_visible()
    expect(page.get_by_role("link", name="see the experiment")).to_be_visible()
    _look(page, "agent-gate-failed")

    _tab(page, "Tools & policies")
    page.locator("#id_allowed_tools").fill("crm-*")
    _tab(page, "Identity & prompt")
    page.get_by_role("button", name="Test this draft").click()
    expect(page.get_by_text("cannot be tested yet")).to_be_visible()
    expect(page.get_by_text("contains '-'")).to_be_visible()
    _look(page, "draft-invalid")
