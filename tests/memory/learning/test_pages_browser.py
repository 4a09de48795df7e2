"""The learning panels in headless Chromium: a run's Quality panel (score, signals, investigation,
the mark links) and the agent's quality per day, at 1440 and 390 px without the page scrolling
sideways on a phone. Screenshots in .data/screenshots/learning-*.png."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from core import tenancy
from core.models import Role
from memory.learning.services import learn_after_run
from tests.agents.factories import AgentFactory
from tests.browser.conftest import PHONE, browser, logged_in, screenshot
from tests.factories import MembershipFactory
from tests.memory.learning.factories import InvestigationFactory
from tests.memory.learning.helpers import finished_run
from tests.processes import AsgiServer
from tools.models import ToolCallStatus

pytestmark = pytest.mark.slow
__all__ = ["browser"]  # the fixture, from the browser tests' conftest


def test_the_quality_panels_render_on_desktop_and_phone(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agent = AgentFactory.create(learning_enabled=True, name="Note taker")
    good = finished_run(agent)
    run = finished_run(
        agent,
        calls=[
            ("crm_search_contacts", {"query": "Zed"}, ToolCallStatus.COMPLETED),
            ("crm_add_note", {"contact_id": "x", "content": "Hi"}, ToolCallStatus.FAILED),
        ],
    )
    with tenancy.agency_context(agent.agency_id):
        InvestigationFactory.create(
            execution=run, steps_used=2, outcome="resolved",
            findings="The surname alone finds nobody either. [called crm_search_contacts]",
        )  # fmt: skip
    for execution in (good, run):
        learn_after_run(execution.id, agency_id=agent.agency_id)
    user = MembershipFactory.create(agency=agent.agency, role=Role.STAFF).user
    run_url = f"{asgi_server.url}/admin/agents/execution/{run.pk}/change/"
    agent_url = f"{asgi_server.url}/admin/agents/agent/{agent.pk}/change/"

    for name, viewport in (("desktop", None), ("phone", PHONE)):
        page = logged_in(browser, asgi_server, user).new_page()
        if viewport is not None:
            page.set_viewport_size({"width": viewport["width"], "height": viewport["height"]})
        page.goto(run_url)
        panel = page.locator(".learning-panel").first
        expect(panel).to_contain_text("Quality 88 %")
        expect(panel).to_contain_text("1 of 2 tool calls failed")
        expect(panel).to_contain_text("Investigation after crm_search_contacts")
        expect(panel.locator('[data-learning="mark-good"]')).to_be_visible()
        panel.scroll_into_view_if_needed()
        screenshot(page, f"learning-run-{name}", full_page=False)
        # The signals' table fits its panel: on a phone each signal is a block of lines.
        table = panel.locator(".learning-table")
        assert table.evaluate("t => t.parentElement.scrollWidth <= t.parentElement.clientWidth")
        assert page.evaluate("document.documentElement.scrollWidth") <= page.evaluate(
            "window.innerWidth"
        )

        page.goto(agent_url)
        page.locator("a", has_text="Flow, teams and learning").first.click()
        agent_panel = page.locator(".learning-panel").first
        expect(agent_panel).to_contain_text("2 learned patterns")
        expect(agent_panel).to_contain_text("94 %")  # (1.00 + 0.88) / 2
        agent_panel.scroll_into_view_if_needed()
        screenshot(page, f"learning-agent-{name}", full_page=False)
