"""The staff home, live: a run's status change reaches the open page over the agency's websocket
and its panels reload without a page reload."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from agents.models import ExecutionStatus
from agents.services import execution_cancel
from core import realtime, tenancy
from core.models import Role
from tests.agents.factories import AgentFactory, ExecutionFactory
from tests.browser.conftest import PHONE, logged_in, screenshot
from tests.factories import MembershipFactory
from tests.processes import AsgiServer

pytestmark = pytest.mark.slow


def test_the_home_updates_its_panels_when_a_run_changes_status(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agent = AgentFactory.create(name="Inbox triage")
    question = ExecutionFactory.create(
        agent=agent,
        status=ExecutionStatus.WAITING_INPUT,
        input_request={"question": "Which of the two deals is the meeting about?"},
    )
    ExecutionFactory.create(agent=agent, status=ExecutionStatus.RUNNING, current_step=2)
    user = MembershipFactory.create(agency=agent.agency, role=Role.APPROVER).user
    page = logged_in(browser, asgi_server, user).new_page()
    page.goto(f"{asgi_server.url}/admin/?home")  # (an approver's /admin/ is the inbox)
    home = page.locator("#staff-home")
    expect(home.locator("[data-live-state]")).to_have_attribute("data-live-state", "open")
    expect(home.locator('#home-summary [data-stat="waiting"]')).to_have_text("1")
    expect(home.locator("#home-waiting")).to_contain_text("Which of the two deals")
    expect(home.locator("#home-success")).to_contain_text("No run has ended")
    # No usage yet: the charts' y axes start at 0 (not Chart.js's -1 to 1), cost in dollars.
    axes = page.evaluate(
        "() => Array.from(document.querySelectorAll('canvas[data-home-chart]'), (canvas) => {"
        " const y = Chart.getChart(canvas).scales.y;"
        " return [y.min, y.max, y.ticks.map((tick) => tick.label)]; })"
    )
    assert [(low, high > 0) for low, high, _ in axes] == [(0, True)] * 3
    assert all(label.startswith("$") for label in axes[0][2])
    page.evaluate("window.__sameDocument = true")

    with tenancy.agency_context(agent.agency_id):
        execution_cancel(execution=question, reason="Answered on the phone.")
    realtime.flush()

    expect(home.locator('#home-summary [data-stat="waiting"]')).to_have_text("0", timeout=10_000)
    expect(home.locator("#home-waiting")).to_contain_text("No run is waiting for an answer")
    expect(home.locator("#home-recent")).to_contain_text("Cancelled")
    # The success rates reload too, and the redrawn charts are drawn again.
    expect(home.locator("#home-success")).to_contain_text("Inbox triage")
    # (each panel reloads on its own request: the charts' may come after the success rates')
    page.wait_for_function(
        "() => Array.from(document.querySelectorAll('canvas[data-home-chart]'))"
        ".every((canvas) => Chart.getChart(canvas) !== undefined)"
    )
    assert page.evaluate("window.__sameDocument") is True  # no reload
    screenshot(page, "staff-home-desktop")

    page.set_viewport_size({"width": PHONE["width"], "height": PHONE["height"]})
    page.reload()
    expect(page.locator("#home-in-progress")).to_contain_text("Inbox triage")
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"] + 1, "the home scrolls sideways on a phone"
    screenshot(page, "staff-home-phone")
