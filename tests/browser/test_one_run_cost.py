"""One run's cost reads the same on every page that shows it (issue 27 item 2): the run's page,
the list of runs, the staff home's recent runs, the agent's "Runs & stats" and "This agent
today", and daily usage. They disagreed: daily usage and "This agent today" added what memory
extraction called after the run to the run's row (6 model calls for a run of 4, 0.001279 for a
run of 0.000969), and each page rounded on its own ("0.000969 USD", "$0.000969", "$0.0010").
Now every page formats with usage's ``usd`` and reads the runs' rows apart from after-run work
(usage.selectors.run_rows). Screenshots at 1440 and 390 px in .data/screenshots/one-cost-*."""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from agents.llm import Message
from agents.models import Agent, Execution, ExecutionStatus
from agents.runtime.loop import run_execution
from core import realtime, tenancy
from core.models import Role
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import text_reply
from memory.model_calls import agent_model_call
from tests.browser.conftest import DESKTOP, PHONE, logged_in, screenshot
from tests.factories import MembershipFactory
from tests.processes import AsgiServer, pending_execution
from usage.models import ModelPrice, UsageDaily, UsagePurpose
from usage.templatetags.usage_format import usd

pytestmark = pytest.mark.slow


def _shoot(page: Page, name: str) -> None:
    for size, suffix in ((DESKTOP, "desktop"), (PHONE, "phone")):
        page.set_viewport_size(size)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= size["width"], f"{page.url} scrolls sideways at {size['width']} ({width})"
        screenshot(page, f"one-cost-{name}-{suffix}")
    page.set_viewport_size(DESKTOP)


def _tab(page: Page, name: str) -> None:
    """Opens one of the agent editor's tabs (unfold's: anchors without an address)."""
    label = re.compile(rf"^\s*{re.escape(name)}\s*$")
    page.locator("a[x-on\\:click]", has_text=label).first.click()


def _row(page: Page, text: str) -> Locator:
    return page.locator("#result_list tbody tr", has_text=re.compile(rf"\b{re.escape(text)}\b"))


def test_one_runs_cost_reads_the_same_on_every_page(
    browser: Browser,
    asgi_server: AsgiServer,
    fake_llm_server: FakeProviderServer,
    make_agent: Callable[..., Agent],
) -> None:
    agent = make_agent("openai", name="Costly")
    with tenancy.agency_context(agent.agency_id):
        ModelPrice.objects.create(
            agency_id=agent.agency_id, provider="openai", model=agent.llm_model,
            input_per_mtok=Decimal("2.5"), output_per_mtok=Decimal("10"),
        )  # fmt: skip
    run_reply = text_reply("Done.", input_tokens=311, output_tokens=43)
    after_reply = text_reply("[]", input_tokens=120, output_tokens=9)  # memory extraction
    fake_llm_server.set_responder(
        lambda request: after_reply if request.last_user_text == "Remember?" else run_reply,
        key=agent.llm_model,
    )
    execution = pending_execution(agent, input_text="Say done.")
    run_execution(execution.id, agency_id=execution.agency_id)
    realtime.flush()
    # What the memory app calls after a run, the same way (budgeted, counted in daily usage).
    after = agent_model_call(
        agent=agent, messages=[Message.user("Remember?")], max_tokens=50,
        purpose=UsagePurpose.MEMORY_EXTRACTION,
    )  # fmt: skip
    assert after.completion is not None
    with tenancy.agency_context(agent.agency_id):
        run = Execution.objects.get(pk=execution.pk)
        spent_today = sum(row.cost_usd for row in UsageDaily.objects.filter(agent_id=agent.pk))
    assert run.status == ExecutionStatus.COMPLETED, run.error
    assert run.cost_usd > 0
    assert after.cost > 0
    assert after.cost != run.cost_usd
    assert spent_today == run.cost_usd + after.cost  # the budget's figure: all of it
    cost = usd(run.cost_usd)  # "$0.001208": 311 tokens in, 43 out

    user = MembershipFactory.create(agency_id=agent.agency_id, role=Role.ADMIN).user
    page = logged_in(browser, asgi_server, user).new_page()
    base = asgi_server.url

    page.goto(f"{base}/admin/agents/execution/{run.pk}/change/")
    expect(page.locator("#live-run [data-conn]")).to_have_text("finished")
    expect(page.locator('#live-run [data-field="cost"]')).to_have_text(cost)
    page.get_by_role("heading", name="Usage", exact=True).click()  # the run's fields, folded
    expect(page.locator("#execution_form").get_by_text(cost, exact=True)).to_be_visible()
    _shoot(page, "run")

    page.goto(f"{base}/admin/agents/execution/")
    expect(_row(page, "Costly").locator("td.field-cost")).to_have_text(cost)
    _shoot(page, "executions")

    page.goto(f"{base}/admin/usage/usagedaily/")
    runs_row = _row(page, "Runs")
    expect(runs_row.locator("td.field-cost")).to_have_text(cost)
    expect(runs_row.locator("td.field-llm_calls")).to_have_text(str(run.llm_call_count))
    expect(_row(page, "Memory extraction").locator("td.field-cost")).to_have_text(usd(after.cost))
    _shoot(page, "daily-usage")

    page.goto(f"{base}/admin/agents/agent/{agent.pk}/change/")
    _tab(page, "Runs & stats")
    expect(page.locator("[data-agent-run-totals]")).to_contain_text(f", {cost},")
    _tab(page, "Limits & budget")
    expect(page.locator("[data-agent-runs-cost-today]")).to_have_text(cost)
    # The budget's figure says what it adds to the runs', and its sum.
    expect(page.locator("[data-agent-spend-today]")).to_contain_text(
        f"{usd(after.cost)} after them (memory extraction, quality judging): "
        f"{usd(spent_today)} in all"
    )
    _shoot(page, "agent-today")

    page.goto(f"{base}/admin/")  # the staff home's recent runs
    recent = page.locator("[data-label='Cost']").first
    expect(recent).to_have_text(cost)
    _shoot(page, "home")
