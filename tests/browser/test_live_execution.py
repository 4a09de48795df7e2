"""The execution page, live: opened before its run starts, it shows the run think, stream its
text, call tools (one failing) and finish, without a reload. (Its steps were also asserted in the
admin's Steps and Tool calls tables until the run page kept one timeline, issue 27: they are
counted in the timeline now.)"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from playwright.sync_api import Browser, expect

from agents.models import Agent
from agents.tasks import run_execution
from core import tenancy
from core.models import Role
from crm.models import Contact
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import Reply, ScriptedToolCall, by_turn
from tests.browser.conftest import PHONE, logged_in, screenshot
from tests.factories import MembershipFactory
from tests.processes import AsgiServer, Worker, pending_execution, wait_for
from usage.templatetags.usage_format import usd

pytestmark = pytest.mark.slow

ANSWER = (
    "Ada Lovelace is on file (ada@example.com), but there is no contact for "
    "nobody@example.com: I could not add the follow-up for them."
)


def test_the_execution_page_shows_the_run_live_without_a_reload(
    browser: Browser,
    asgi_server: AsgiServer,
    celery_worker: Worker,
    fake_llm_server: FakeProviderServer,
    make_agent: Callable[..., Agent],
) -> None:
    agent = make_agent("openai", allowed_tools=["crm_*"], name="Lead follow-up")
    with tenancy.agency_context(agent.agency_id):
        Contact.objects.create(
            agency_id=agent.agency_id, site_id=agent.site_id, email="ada@example.com",
            first_name="Ada", last_name="Lovelace",
        )  # fmt: skip
    fake_llm_server.set_responder(
        by_turn(
            Reply(
                text="Looking up both contacts.",
                tool_calls=(
                    ScriptedToolCall("crm_get_contact", {"email": "ada@example.com"}),
                    ScriptedToolCall("crm_get_contact", {"email": "nobody@example.com"}),
                ),
                latency=0.8,
            ),
            Reply(text=ANSWER, stream_interval=0.08, latency=0.3),
        ),
        key=agent.llm_model,
    )
    execution = pending_execution(agent, input_text="Follow up Ada and nobody@example.com.")
    user = MembershipFactory.create(agency_id=agent.agency_id, role=Role.STAFF).user
    context = logged_in(browser, asgi_server, user)
    page = context.new_page()
    page.goto(f"{asgi_server.url}/admin/agents/execution/{execution.id}/change/")
    live = page.locator("#live-run")
    expect(live.locator("[data-conn]")).to_have_text("live")
    expect(live.locator('[data-field="status"]')).to_have_text("Pending")
    expect(page.locator("[data-run-tool=cancel]")).to_be_visible()
    page.evaluate("window.__sameDocument = true")

    run_execution.delay(str(execution.id), agency_id=str(agent.agency_id))

    expect(live.locator('[data-field="status"]')).to_have_text("Running", timeout=15_000)
    act_steps = live.locator(".live-step--act")
    expect(act_steps).to_have_count(2, timeout=15_000)
    expect(act_steps.first).to_contain_text("crm_get_contact")
    expect(act_steps.first).to_contain_text("Lovelace")  # the result, inline
    expect(live.locator(".live-step--failed")).to_have_count(1)
    # The final answer streams in before its step is persisted.
    streaming = live.locator(".live-step--streaming")
    expect(streaming).to_be_visible(timeout=15_000)
    expect(streaming).to_contain_text("Ada Lovelace is on file")
    screenshot(page, "execution-streaming-desktop")

    expect(live.locator('[data-field="status"]')).to_have_text("Completed", timeout=20_000)
    expect(streaming).to_have_count(0)  # folded into the persisted think step
    expect(live.locator(".live-step--think").last).to_contain_text(ANSWER)
    expect(live.locator('[data-field="failed_flag"]')).to_have_text(
        "1 tool call failed in this run."
    )
    expect(live.locator('[data-field="outcome"]')).to_contain_text(ANSWER)
    # The rest of the page (fields, title, actions) follows the ended run.
    run_fields = page.locator("#execution_form fieldset").first
    expect(run_fields.locator(".field-line", has_text="Status")).to_contain_text("Completed")
    expect(run_fields.locator(".field-line", has_text="Stop reason")).not_to_contain_text("-")
    expect(page).to_have_title(re.compile(r"\(completed\)"))
    expect(page.locator("#header-inner h1")).to_contain_text("(completed)")
    expect(page.locator("[data-run-tool=cancel]")).to_have_count(0)
    expect(page.locator("[data-run-tool=replay]")).to_be_visible()
    # One timeline: the steps are not repeated in admin tables below it.
    expect(page.locator(".inline-group")).to_have_count(0)
    expect(page.locator('[data-flow-diagram="flow-diagram-state"]')).to_contain_text("Completed")
    assert page.evaluate("window.__sameDocument") is True  # never reloaded
    finished = wait_for(execution)
    # The header adds each step's figures as its event arrives: it waits for the last one's.
    expect(live.locator('[data-field="cost"]')).to_have_text(usd(finished.cost_usd))
    expect(live.locator('[data-field="tokens"]')).to_have_text(str(finished.tokens_total))
    with tenancy.agency_context(agent.agency_id):
        steps = finished.steps.count()
    expect(live.locator(".live-timeline .live-step")).to_have_count(steps)
    screenshot(page, "execution-desktop")

    page.set_viewport_size(PHONE)
    page.reload()
    expect(live.locator(".live-step--act")).to_have_count(2)
    # Measured once drawn: the diagrams are drawn after the page loads.
    expect(page.locator('[data-flow-diagram][data-rendered="true"]')).to_have_count(
        2, timeout=20_000
    )
    width = page.evaluate("document.documentElement.scrollWidth")
    screenshot(page, "execution-phone")
    assert width <= PHONE["width"] + 1, "the page scrolls sideways on a phone"
    # A step opened on a phone: its action is on screen, its tool named in its line.
    act = live.locator(".live-step--act").first
    expect(act.locator(".live-step__tool")).to_be_visible()
    act.locator("summary").click()
    retry = act.get_by_role("link", name="Retry from here")
    retry.scroll_into_view_if_needed()
    box = retry.bounding_box()
    assert box is not None
    assert box["x"] + box["width"] <= PHONE["width"]
    context.close()
