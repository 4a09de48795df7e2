"""Admin pages a review found rough (issue 27), as a new user meets them in Chromium: the agent
editor's one row of tabs with its labels in words, the "Try it" dialog opened by its address,
an approver's argument names, the approvals list with nothing waiting, memories cut after a
whole word, the trigger log's count and the API docs. Each page is looked at 1440 and 390 px
wide, and none scrolls sideways on the phone."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from agents.models import Agent
from core import tenancy
from core.models import Agency, Role
from memory.models import MemoryType
from tests.agents.factories import (
    AgentFactory,
    AgentGoalFactory,
    ExecutionFactory,
    TriggerLogFactory,
)
from tests.approvals.inbox_helpers import EMAIL_ARGS, waiting_approval
from tests.browser.conftest import (
    agency_member,
    logged_in,
    look_at_both_widths,
)
from tests.memory.factories import MemoryFactory
from tests.processes import AsgiServer

pytestmark = pytest.mark.slow


def _agent(agency: Agency) -> Agent:
    with tenancy.agency_context(agency.id):
        agent = AgentFactory.create(
            agency=agency,
            name="SDR Agent",
            capabilities=["lead_qualification", "email_drafting"],
            examples=[],
        )
        AgentGoalFactory.create(agent=agent, name="Qualify every new lead")
    return agent


def test_the_agent_editor_has_one_row_of_tabs_and_labels_in_words(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agency, user = agency_member(Role.ADMIN)
    agent = _agent(agency)
    page = logged_in(browser, asgi_server, user).new_page()
    page.goto(f"{asgi_server.url}/admin/agents/agent/{agent.pk}/change/")

    expect(page.locator("#tabs-wrapper")).to_have_count(0)  # unfold's "General | Goals" row
    tabs = page.locator("#agent-tabs nav a")
    expect(tabs.first).to_have_text("Identity & prompt")
    expect(tabs.nth(1)).to_have_text("Goals")
    form = page.locator("#agent_form")
    for label in ("Active", "Public", "Capabilities", "Examples"):
        expect(form.get_by_text(label, exact=True).first).to_be_visible()
    expect(page.locator("#id_capabilities")).to_have_value("lead_qualification, email_drafting")
    expect(page.locator("#id_examples")).to_have_value("")
    look_at_both_widths(page, "u6-agent-editor")

    tabs.nth(1).click()
    expect(page.locator("#goals-group")).to_be_visible()
    expect(page.locator("#id_goals-0-name")).to_have_value("Qualify every new lead")
    expect(page.get_by_text("Add another goal")).to_be_visible()
    expect(page.locator("#id_name")).to_be_hidden()
    look_at_both_widths(page, "u6-agent-editor-goals")

    page.get_by_text("Limits & budget", exact=True).click()
    expect(page.locator("label[for=id_timeout_seconds]")).to_contain_text("Timeout (seconds)")
    expect(page.locator("label[for=id_timeout_seconds]")).to_be_visible()
    look_at_both_widths(page, "u6-agent-editor-limits")


def test_the_try_it_dialog_opened_by_its_address_is_a_styled_page(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agency, user = agency_member(Role.ADMIN)
    agent = _agent(agency)
    page = logged_in(browser, asgi_server, user).new_page()
    page.goto(f"{asgi_server.url}/admin/agents/agent/{agent.pk}/try_it/")
    assert page.url.endswith(f"/admin/agents/agent/{agent.pk}/run/")
    expect(page.locator("#nav-sidebar, aside").first).to_be_attached()  # the admin's layout
    expect(page.get_by_label("Instruction")).to_be_visible()
    look_at_both_widths(page, "u6-try-it-opened")

    # The agent page's own "Try it" still opens its dialog there.
    page.goto(f"{asgi_server.url}/admin/agents/agent/{agent.pk}/change/")
    page.get_by_role("link", name="Try it").click()
    expect(page.locator("#dialog").get_by_label("Instruction")).to_be_visible()


def test_an_approver_reads_the_arguments_names_in_words(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agency, user = agency_member(Role.APPROVER)
    with tenancy.agency_context(agency.id):
        approval = waiting_approval(agency, arguments={**EMAIL_ARGS, "template_id": "welcome"})
    page = logged_in(browser, asgi_server, user).new_page()
    page.goto(f"{asgi_server.url}/approvals/{approval.pk}/")
    expect(page.locator(".inbox-args dt", has_text="Template ID")).to_have_count(1)
    look_at_both_widths(page, "u6-approval")

    page.goto(f"{asgi_server.url}/approvals/{approval.pk}/edit/")
    expect(page.get_by_label("Template ID")).to_have_value("welcome")
    expect(page.locator("label", has_text="template_id")).to_have_count(0)
    look_at_both_widths(page, "u6-edit-and-approve")

    page.get_by_label("Template ID").fill("follow-up")
    page.get_by_role("button", name="Review changes").click()
    expect(page.locator(".inbox-changes dt")).to_have_text(["Template ID"])
    look_at_both_widths(page, "u6-edit-and-approve-review")


def test_the_approvals_list_with_nothing_waiting_says_what_appears_there(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    _agency, user = agency_member(Role.ADMIN)
    page = logged_in(browser, asgi_server, user).new_page()
    page.goto(f"{asgi_server.url}/admin/approvals/approval/")
    empty = page.locator("#empty-state")
    expect(empty.get_by_role("heading")).to_have_text("No approval is waiting")
    expect(empty).not_to_contain_text("yielded")
    expect(empty.get_by_role("link", name="Open the inbox")).to_be_visible()
    look_at_both_widths(page, "u6-approvals-empty")


def test_memories_are_cut_after_a_whole_word_and_runs_lists_read_in_words(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agency, user = agency_member(Role.ADMIN)
    agent = _agent(agency)
    with tenancy.agency_context(agency.id):
        MemoryFactory.create(
            agent=agent,
            memory_type=MemoryType.PREFERENCE,
            content="Priya Raman (Northwind Traders) prefers e-mail to calls and wants the "
            "12-seat pricing before the end of the quarter.",
        )
        TriggerLogFactory.create(agent=agent)
        ExecutionFactory.create(agent=agent, tool_call_count=3)
    page = logged_in(browser, asgi_server, user).new_page()
    page.goto(f"{asgi_server.url}/admin/memory/memory/")
    expect(page.locator("#result_list tbody th").first).to_have_text(
        "[preference] Priya Raman (Northwind Traders) prefers e-mail to calls and wants the "
        "12-seat…"
    )
    look_at_both_widths(page, "u6-memories")

    page.goto(f"{asgi_server.url}/admin/agents/triggerlog/")
    expect(page.get_by_text("1 trigger log entry")).to_be_visible()
    look_at_both_widths(page, "u6-trigger-log")

    page.goto(f"{asgi_server.url}/admin/agents/execution/")
    expect(page.locator("#result_list thead")).to_contain_text("Tool calls")
    look_at_both_widths(page, "u6-executions")


def test_the_api_docs_page_draws_the_schema(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    _agency, user = agency_member(Role.ADMIN)
    page = logged_in(browser, asgi_server, user).new_page()
    page.goto(f"{asgi_server.url}/api/docs/")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("AgentDesk API")
    expect(page.locator(".opblock").first).to_be_visible()
    # A way back to the product (issue 27's review: the stock page had none).
    bar = page.get_by_role("navigation", name="AgentDesk")
    expect(bar.get_by_role("link", name="API keys")).to_have_attribute(
        "href", "/admin/core/apikey/"
    )
    bar.get_by_role("link", name="← AgentDesk admin").click()
    expect(page).to_have_url(f"{asgi_server.url}/admin/")
    page.go_back()
    expect(page.locator(".opblock").first).to_be_visible()
    look_at_both_widths(page, "u6-api-docs")
