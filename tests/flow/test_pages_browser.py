"""Flow analysis's pages in headless Chromium: the staff home's "Stuck runs" panel and a run's
completeness analysis, at 1440 and 390 px (no sideways scroll on a phone); screenshots in
.data/screenshots/."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import Browser, expect

from agents.models import ExecutionStatus
from core.models import Role
from tests.agents.factories import AgentFactory, ExecutionFactory
from tests.browser.conftest import PHONE, browser, logged_in, screenshot
from tests.factories import MembershipFactory
from tests.flow.factories import CompletenessAnalysisFactory, LoopDetectionFactory, StuckRunFactory
from tests.processes import AsgiServer

pytestmark = pytest.mark.slow
__all__ = ["browser"]  # the fixture, from the browser tests' conftest


def test_the_stuck_runs_panel_and_a_runs_analysis_read_well_on_desktop_and_phone(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agent = AgentFactory.create(name="Renewal follow-up")
    running = ExecutionFactory.create(agent=agent, status=ExecutionStatus.RUNNING)
    StuckRunFactory.create(
        execution=running,
        entered_at=timezone.now() - datetime.timedelta(minutes=25),
        expected_seconds=600,
    )
    ended = ExecutionFactory.create(agent=agent, status=ExecutionStatus.FAILED)
    CompletenessAnalysisFactory.create(
        execution=ended,
        completeness_score=0.8333,
        expected_states_visited=3,
        expected_states_total=3,
        visited_states=["pending", "running", "failed"],
        expected_actions_total=1,
        missing_actions=["crm_get_contact"],
        anomalies=[
            {
                "type": "skipped_required_step",
                "description": "The required step crm_get_contact was skipped.",
            }
        ],
    )
    LoopDetectionFactory.create(execution=ended)
    user = MembershipFactory.create(agency=agent.agency, role=Role.STAFF).user
    page = logged_in(browser, asgi_server, user).new_page()

    page.goto(f"{asgi_server.url}/admin/")
    panel = page.locator("#home-stuck")
    expect(panel).to_contain_text("Stuck runs")
    expect(panel).to_contain_text("Renewal follow-up")
    expect(panel).to_contain_text("600 s")
    expect(panel).to_contain_text("25 min")
    panel.scroll_into_view_if_needed()
    screenshot(page, "flow-stuck-panel-desktop")

    page.set_viewport_size({"width": PHONE["width"], "height": PHONE["height"]})
    page.goto(f"{asgi_server.url}/admin/")
    page.locator("#home-stuck").scroll_into_view_if_needed()
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"] + 1, "the home scrolls sideways on a phone"
    screenshot(page, "flow-stuck-panel-phone")

    page.set_viewport_size({"width": 1440, "height": 1000})
    page.goto(f"{asgi_server.url}/admin/agents/execution/{ended.pk}/change/")
    analysis = page.locator(".flow-panel")
    expect(analysis).to_contain_text("83 % complete")
    expect(analysis).to_contain_text("The required step crm_get_contact was skipped.")
    expect(analysis).to_contain_text("Run stopped")
    analysis.scroll_into_view_if_needed()
    screenshot(page, "flow-run-analysis-desktop")
    page.set_viewport_size({"width": PHONE["width"], "height": PHONE["height"]})
    page.goto(f"{asgi_server.url}/admin/agents/execution/{ended.pk}/change/")
    analysis = page.locator(".flow-panel")
    analysis.scroll_into_view_if_needed()
    # The run page's trace tables scroll on their own; the analysis fits the screen, its table
    # scrolling inside it.
    box = analysis.bounding_box()
    assert box is not None
    assert box["x"] >= 0
    assert box["x"] + box["width"] <= PHONE["width"] + 1, box
    screenshot(page, "flow-run-analysis-phone", full_page=False)
