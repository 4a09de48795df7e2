"""A run's diagrams in headless Chromium with no network (every request not to the test server
is aborted): Mermaid, served as a static file, draws both as SVG; a hostile tool name carrying
HTML draws as text and runs nothing; on a phone the diagrams scroll sideways inside their box
and the page does not. Screenshots at 1440 and 390 px in .data/screenshots/."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Browser, Page, Route, expect

from agents.models import StepType
from core.models import Role
from tests.agents.factories import ExecutionStepFactory
from tests.browser.conftest import PHONE, browser, logged_in, screenshot
from tests.factories import MembershipFactory
from tests.flow.test_diagrams import at, known_run
from tests.processes import AsgiServer

pytestmark = pytest.mark.slow
__all__ = ["browser"]  # the fixture, from the browser tests' conftest
HOSTILE_TOOL = '<img src=x onerror="window.__pwned=1">"; end\nparticipant Evil'


def _offline(page: Page, server: AsgiServer) -> list[str]:
    """Abort every request that does not go to the test server; return what was refused."""
    refused: list[str] = []

    def handle(route: Route) -> None:
        if route.request.url.startswith(server.url):
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    page.route("**/*", handle)
    return refused


def _loads_of(page: Page, url: str) -> list[str]:
    """The page's requests for ``url``: its load, then any refetch that swaps its parts in."""
    loads: list[str] = []
    page.on("request", lambda request: loads.append(request.url) if request.url == url else None)
    return loads


def test_the_run_page_draws_both_diagrams_offline_and_scrolls_them_on_a_phone(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    run = known_run()
    ExecutionStepFactory.create(
        execution=run, step_number=8, step_type=StepType.ACT, started_at=at(95),
        tool_name=HOSTILE_TOOL, tool_input={"q": "<script>window.__pwned=2</script>"},
    )  # fmt: skip
    user = MembershipFactory.create(agency=run.agency, role=Role.STAFF).user
    url = f"{asgi_server.url}/admin/agents/execution/{run.pk}/change/"

    page = logged_in(browser, asgi_server, user).new_page()
    _offline(page, asgi_server)
    loads = _loads_of(page, url)
    page.goto(url)
    # The page's socket has caught up: an ended run's page has nothing newer to draw.
    expect(page.locator("#live-run [data-conn]")).to_have_text("finished")
    sequence = page.locator('[data-flow-diagram="flow-diagram-sequence"]')
    state = page.locator('[data-flow-diagram="flow-diagram-state"]')
    expect(sequence.locator("svg")).to_be_visible(timeout=20_000)
    expect(state.locator("svg")).to_be_visible(timeout=20_000)
    expect(sequence).to_have_attribute("data-rendered", "true")
    expect(sequence).to_contain_text("Lead qualifier")
    expect(sequence).to_contain_text("crm_get_contact")
    expect(sequence).to_contain_text("Scorer")
    expect(sequence).to_contain_text('<img src=x onerror="window.__pwned=1">')  # as text
    expect(state).to_contain_text("Waiting for approval")  # the badge's label (not the raw name)
    expect(state).not_to_contain_text("waiting_approval")
    assert page.locator("[data-flow-diagram] img, [data-flow-diagram] script").count() == 0
    assert page.evaluate("window.__pwned") is None
    # On a desktop the sequence fits its box; "Full size" draws it at its natural width.
    fitted = sequence.evaluate("b => [b.scrollWidth, b.clientWidth, b.dataset.size]")
    assert fitted[0] <= fitted[1]
    assert fitted[2] == "fit"
    toggle = page.locator('[data-diagram-size="flow-diagram-sequence"]')
    expect(toggle).to_have_text("Full size")
    toggle.click()
    expect(sequence).to_have_attribute("data-size", "full")
    expect(toggle).to_have_text("Fit to width")
    natural = sequence.evaluate("b => b.querySelector('svg').viewBox.baseVal.width")
    assert sequence.evaluate("b => b.querySelector('svg').getBoundingClientRect().width") == (
        pytest.approx(natural, abs=1)
    )
    toggle.click()
    expect(sequence).to_have_attribute("data-size", "fit")
    sequence.scroll_into_view_if_needed()
    shot = screenshot(page, "flow-diagrams-desktop")
    sequence.screenshot(path=str(shot.with_name("flow-diagrams-sequence.png")))

    phone = logged_in(browser, asgi_server, user).new_page()
    phone.set_viewport_size({"width": PHONE["width"], "height": PHONE["height"]})
    _offline(phone, asgi_server)
    phone_loads = _loads_of(phone, url)
    phone.goto(url)
    expect(phone.locator("#live-run [data-conn]")).to_have_text("finished")
    box = phone.locator('[data-flow-diagram="flow-diagram-sequence"]')
    expect(box.locator("svg")).to_be_visible(timeout=20_000)
    box.scroll_into_view_if_needed()
    widths = box.evaluate("b => [b.scrollWidth, b.clientWidth]")
    # Fitted, its text would be too small: full size, scrolling sideways in its box ...
    assert widths[0] > widths[1]
    expect(box).to_have_attribute("data-size", "full")
    page_width = phone.evaluate("document.documentElement.scrollWidth")
    assert page_width <= PHONE["width"]  # ... and the page does not
    shot = screenshot(phone, "flow-diagrams-phone")
    phone.locator(".flow-diagrams").screenshot(
        path=str(shot.with_name("flow-diagrams-phone-box.png"))
    )
    # Neither page fetched itself again to swap its parts (the elements measured and shot above).
    assert (loads, phone_loads) == ([url], [url])

    # The replay report (of this factory-made run: its tools as they are now) reads on both.
    replay = f"{asgi_server.url}/admin/agents/execution/{run.pk}/replay/"
    phone.goto(replay)
    expect(phone.locator("[data-replay=summary]")).to_be_visible()
    expect(phone.locator(".flow-replay-table")).to_contain_text("crm_get_contact")
    assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    screenshot(phone, "flow-replay-phone")
    page.goto(replay)
    expect(page.locator(".flow-replay-table")).to_contain_text("email_send")
    screenshot(page, "flow-replay-desktop")

    # The retry's confirmation page (the POST itself: tests/flow/test_replay.py).
    retry = f"{asgi_server.url}/admin/agents/execution/{run.pk}/retry/3/"
    page.goto(retry)
    expect(page.get_by_role("button", name="Retry from step 3")).to_be_visible()
    screenshot(page, "flow-retry-desktop")
    phone.goto(retry)
    expect(phone.get_by_role("button", name="Retry from step 3")).to_be_visible()
    assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    screenshot(phone, "flow-retry-phone")
