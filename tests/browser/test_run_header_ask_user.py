"""The run page's header counts an ask_user call from the moment it asks (issue 27 item 2): it
said 0 tool calls while the run waited for the answer; and the step that brings the answer does
not count it again. Screenshots: .data/screenshots/run-header-ask-user-*.png."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import Browser, expect

from agents.models import Agent
from agents.tasks import run_execution
from approvals.models import Question
from approvals.questions import question_answer
from core import tenancy
from core.models import Role
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import Reply, by_turn, tool_call_reply
from tests.approvals.test_questions import ASK
from tests.browser.conftest import DESKTOP, PHONE, logged_in, screenshot
from tests.factories import MembershipFactory
from tests.processes import AsgiServer, Worker, pending_execution, wait_for

pytestmark = pytest.mark.slow


def test_the_header_counts_the_question_while_it_waits_and_once_after_the_answer(
    browser: Browser,
    asgi_server: AsgiServer,
    celery_worker: Worker,
    fake_llm_server: FakeProviderServer,
    make_agent: Callable[..., Agent],
) -> None:
    agent = make_agent("openai", allowed_tools=["crm_search_contacts", "ask_user"], name="Alex")
    fake_llm_server.set_responder(
        by_turn(
            tool_call_reply("crm_search_contacts", {"query": "Zed"}),
            tool_call_reply("ask_user", ASK),
            Reply(text="The Pro offer it is.", latency=4),  # time to read the header
        ),
        key=agent.llm_model,
    )
    execution = pending_execution(agent, input_text="Prepare the renewal offer for Zed.")
    user = MembershipFactory.create(agency_id=agent.agency_id, role=Role.STAFF).user
    page = logged_in(browser, asgi_server, user).new_page()
    page.goto(f"{asgi_server.url}/admin/agents/execution/{execution.id}/change/")
    live = page.locator("#live-run")
    expect(live.locator("[data-conn]")).to_have_text("live")

    run_execution.delay(str(execution.id), agency_id=str(agent.agency_id))

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

    with tenancy.agency_context(agent.agency_id):
        question = Question.objects.get(execution_id=execution.id)
        question_answer(question=question, answer="Pro", user_id=user.id)
    # The answer's step arrives live (the model's last reply follows 4 s later): it does not
    # add the question a second time (until the run's end resets the totals, it said 3).
    expect(live.locator(".live-timeline")).to_contain_text('"answer": "Pro"', timeout=20_000)
    assert status.get_attribute("data-status") != "completed"
    assert tool_calls.inner_text() == "2"
    expect(status).to_have_attribute("data-status", "completed", timeout=20_000)
    finished = wait_for(execution)
    assert finished.tool_call_count == 2
    expect(tool_calls).to_have_text("2")
