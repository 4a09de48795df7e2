"""The run page's timeline draws an ask_user question where it was asked (issue 27 item 2): its
act step is written only with the answer (the resumed run's first step), and was drawn after the
run's "Waiting for input" and the resume, as if asked then. Now the question stands before the
park it caused, while it waits and after, live and on a reload; the answer shows on the resume's
line, where it came. Screenshots: .data/screenshots/run-timeline-ask-user-*.png."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import Browser, Page, expect

from agents.models import Agent
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import Reply, ScriptedToolCall, by_turn
from tests.approvals.test_questions import QUESTION
from tests.browser.conftest import DESKTOP, PHONE, WatchedRun, screenshot, watch_run
from tests.processes import AsgiServer, Worker, wait_for

pytestmark = pytest.mark.slow


def _timeline(page: Page) -> list[str]:
    """The timeline's lines in order: "act ask_user", "think", "state waiting_input", ..."""
    return page.eval_on_selector_all(
        ".live-timeline > li",
        """items => items.map(item => item.classList.contains("live-state")
            ? "state " + item.querySelector(".live-badge").dataset.status
            : item.querySelector(".live-step__kind").textContent
              + (item.querySelector(".live-step__tool")
                 ? " " + item.querySelector(".live-step__tool").textContent : ""))""",
    )


def _shots(page: Page, name: str) -> None:
    for size, suffix in ((DESKTOP, "desktop"), (PHONE, "phone")):
        page.set_viewport_size(size)
        page.reload()
        expect(page.locator("#live-run [data-conn]")).not_to_have_text("connecting…")
        expect(page.locator(".live-timeline .live-step--act")).to_have_count(1)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= size["width"], f"the run page scrolls sideways ({width})"
        screenshot(page, f"run-timeline-ask-user-{name}-{suffix}")
    page.set_viewport_size(DESKTOP)


def test_the_question_is_drawn_where_it_was_asked_and_the_answer_where_it_came(
    ask_user_run: Callable[..., WatchedRun],
) -> None:
    run = ask_user_run()
    page, live = run.page, run.live

    # Live, while it waits: the question before the park it caused.
    waiting = live.locator('.live-state [data-status="waiting_input"]')
    expect(waiting).to_have_count(1, timeout=20_000)
    asked = live.locator(".live-timeline .live-step--act")
    expect(asked).to_contain_text(QUESTION)
    assert _timeline(page)[-2:] == ["act ask_user", "state waiting_input"]
    _shots(page, "waiting")  # (the reloads: the same order, drawn from the snapshot and replay)
    assert _timeline(page)[-2:] == ["act ask_user", "state waiting_input"]

    run.answer("Pro")

    # Live, the answer's step takes the question's place; the resume's line shows the answer.
    expect(asked).to_contain_text('"answer": "Pro"', timeout=20_000)
    resumed = live.locator(".live-state", has=page.locator('[data-status="pending"]')).last
    expect(resumed).to_contain_text("Answer: Pro")
    expect(live.locator('[data-field="status"]')).to_have_attribute(
        "data-status", "completed", timeout=20_000
    )
    wait_for(run.execution)
    # (the resume goes through pending: "question answered", which shows the answer)
    order = [
        "act ask_user",
        "state waiting_input",
        "state pending",
        "state running",
        "think",
        "state completed",
    ]
    assert _timeline(page)[-6:] == order
    assert _timeline(page).count("act ask_user") == 1

    # After a reload: the same, from the replayed events alone.
    _shots(page, "answered")
    assert _timeline(page)[-6:] == order
    assert _timeline(page).count("act ask_user") == 1
    expect(asked).to_contain_text('"answer": "Pro"')
    expect(resumed).to_contain_text("Answer: Pro")


def test_a_call_after_a_wait_in_the_same_reply_is_drawn_after_the_wake(
    browser: Browser,
    asgi_server: AsgiServer,
    celery_worker: Worker,
    fake_llm_server: FakeProviderServer,
    make_agent: Callable[..., Agent],
) -> None:
    """Only a call that asked a person moves before its park: the next call of a reply whose
    wait parked the run is the woken run's first step, an act step, and stays where it ran."""
    agent = make_agent("openai", allowed_tools=["wait", "crm_search_contacts"], name="Alex")
    calls = (
        ScriptedToolCall("wait", {"seconds": 1}),
        ScriptedToolCall("crm_search_contacts", {"query": "Zed"}),
    )
    fake_llm_server.set_responder(
        by_turn(Reply(tool_calls=calls), Reply(text="Zed is on the Basic plan.")),
        key=agent.llm_model,
    )
    run = watch_run(browser, asgi_server, agent, "Look Zed up in a second.")
    expect(run.live.locator('[data-field="status"]')).to_have_attribute(
        "data-status", "completed", timeout=30_000
    )
    wait_for(run.execution)
    order = [
        "think",
        "act wait",
        "state waiting_input",
        "state pending",
        "state running",
        "act crm_search_contacts",
        "think",
        "state completed",
    ]
    answers = run.live.locator(".live-timeline .live-state__answer")
    assert _timeline(run.page)[-8:] == order  # (it drew the search before the wait's park)
    expect(answers).to_have_count(0)  # (it said "Answer: [...]", the search's result)
    run.page.reload()
    expect(run.live.locator("[data-conn]")).to_have_text("finished")
    expect(run.live.locator('.live-state [data-status="completed"]')).to_have_count(1)
    assert _timeline(run.page)[-8:] == order
    expect(answers).to_have_count(0)
