"""The run page's header counts an ask_user call from the moment it asks (issue 27 item 2): it
said 0 tool calls while the run waited for the answer; and the step that brings the answer does
not count it again. Screenshots: .data/screenshots/run-header-ask-user-*.png."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import expect

from devkit.fake_server.script import tool_call_reply
from tests.browser.conftest import DESKTOP, PHONE, WatchedRun, screenshot
from tests.processes import wait_for

pytestmark = pytest.mark.slow


def test_the_header_counts_the_question_while_it_waits_and_once_after_the_answer(
    ask_user_run: Callable[..., WatchedRun],
) -> None:
    run = ask_user_run(tool_call_reply("crm_search_contacts", {"query": "Zed"}))
    page, live = run.page, run.live

    status = live.locator('[data-field="status"]')
    expect(status).to_have_attribute("data-status", "waiting_input", timeout=20_000)
    tool_calls = live.locator('[data-field="tool_calls"]')
    expect(tool_calls).to_have_text("2")  # the search, and the question out (it said 1)
    for size, suffix in ((DESKTOP, "desktop"), (PHONE, "phone")):
        page.set_viewport_size(size)
        page.reload()
        expect(live.locator("[data-conn]")).to_have_text("live")
        expect(tool_calls).to_have_text("2")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= size["width"], f"the run page scrolls sideways ({width})"
        screenshot(page, f"run-header-ask-user-{suffix}")
    page.set_viewport_size(DESKTOP)

    run.answer("Pro")
    # The answer's step arrives live (the model's last reply follows 4 s later): it does not
    # add the question a second time (until the run's end resets the totals, it said 3).
    expect(live.locator(".live-timeline")).to_contain_text('"answer": "Pro"', timeout=20_000)
    assert status.get_attribute("data-status") != "completed"
    assert tool_calls.inner_text() == "2"
    expect(status).to_have_attribute("data-status", "completed", timeout=20_000)
    finished = wait_for(run.execution)
    assert finished.tool_call_count == 2
    expect(tool_calls).to_have_text("2")
