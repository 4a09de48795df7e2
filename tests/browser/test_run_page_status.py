"""The run page names a run's status once and as the badge does (issue 27 item 1): the admin's
"Run" section below the live view repeated the status as the page drew it (still "Pending" beside
a "Completed" badge when the page's own refetch was slow or lost), and the state diagram named
the states by their raw values (``waiting_approval``). Screenshots at 1440 and 390 px in
.data/screenshots/run-page-status-*.png."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from agents.models import Agent, ExecutionStatus
from agents.tasks import run_execution as run_execution_task
from core.models import Role
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import Reply, by_turn
from tests.browser.conftest import DESKTOP, PHONE, logged_in, screenshot
from tests.browser.test_run_page import _opened, _staff, _url
from tests.factories import MembershipFactory
from tests.flow.test_diagrams import known_run
from tests.processes import AsgiServer, Worker, pending_execution, wait_for

pytestmark = pytest.mark.slow

# Every status's label but the run's last: none may stand on the page outside the timeline.
LEFT_BEHIND = re.compile(
    "|".join(re.escape(label) for value, label in ExecutionStatus.choices if value != "completed")
)


def _shoot(page: Page, name: str) -> None:
    """Full-page shots at 1440 and 390 px; the page never scrolls sideways on a phone."""
    for size, suffix in ((DESKTOP, "desktop"), (PHONE, "phone")):
        page.set_viewport_size(size)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= size["width"], f"scrolls sideways at {size['width']} px ({width})"
        screenshot(page, f"run-page-status-{name}-{suffix}")
    page.set_viewport_size(DESKTOP)


def test_a_run_ending_while_watched_leaves_no_stale_status_below_the_live_view(
    browser: Browser,
    asgi_server: AsgiServer,
    celery_worker: Worker,
    fake_llm_server: FakeProviderServer,
    make_agent: Callable[..., Agent],
) -> None:
    """The page's refetch of its fields gets no answer (a slow page): the badge follows the
    socket to "Completed", and the Run section below it does not still say "Pending"."""
    agent = make_agent("openai")
    fake_llm_server.set_responder(by_turn(Reply(text="Done.", latency=1)), key=agent.llm_model)
    execution = pending_execution(agent, input_text="Say done.")
    context = logged_in(browser, asgi_server, _staff(agent))
    page = context.new_page()
    url = _url(asgi_server, execution)
    _opened(page, url)
    heading = page.get_by_role("heading", name="Run", exact=True)
    section = page.locator("#execution_form fieldset").filter(has=heading)
    expect(section).to_contain_text(agent.name)  # the Run section, as the page drew it
    page.route(url, lambda route: route.abort())

    run_execution_task.delay(str(execution.id), agency_id=str(agent.agency_id))

    live = page.locator("#live-run")
    expect(live.locator('[data-field="status"]')).to_have_text("Completed", timeout=20_000)
    assert wait_for(execution).status == ExecutionStatus.COMPLETED
    expect(section).to_contain_text(agent.name)
    expect(section.get_by_text(LEFT_BEHIND)).to_have_count(0)
    # The timeline's state changes give their reason in words, as the diagram does.
    expect(live.locator(".live-state__reason", has_text="final answer")).to_have_count(1)
    expect(live).not_to_contain_text("final_answer")
    _shoot(page, "ended")
    context.close()


def test_the_state_diagram_names_each_state_as_the_badge_does(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    run = known_run()  # pending, running, waiting for approval, waiting for another agent, ...
    user = MembershipFactory.create(agency=run.agency, role=Role.STAFF).user
    page = logged_in(browser, asgi_server, user).new_page()
    page.goto(f"{asgi_server.url}/admin/agents/execution/{run.pk}/change/")
    expect(page.locator("#live-run [data-conn]")).to_have_text("finished")
    state = page.locator('[data-flow-diagram="flow-diagram-state"]')
    expect(state.locator("svg")).to_be_visible(timeout=20_000)
    for label in ("Pending", "Running", "Waiting for approval", "Waiting for another agent"):
        expect(state).to_contain_text(label)
        # The timeline's lines name them alike.
        badges = page.locator("#live-run .live-state .live-badge", has_text=label)
        expect(badges.first).to_be_visible()
    expect(state).to_contain_text("approval required")
    expect(state).not_to_contain_text(re.compile("waiting_|approval_|final_answer"))
    sequence = page.locator('[data-flow-diagram="flow-diagram-sequence"]')
    expect(sequence.locator("svg")).to_be_visible(timeout=20_000)
    expect(sequence).to_contain_text("Completed")
    state.scroll_into_view_if_needed()
    _shoot(page, "diagram")
