"""Admin lists as a new user meets them (issue 27): a search by meaning lists the best match
first; a list that hides rows by default says so, with the way to see them all. Each page is
looked at 1440 and 390 px wide, and none scrolls sideways on the phone."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import Browser, expect

from approvals.models import ApprovalStatus
from core import tenancy
from core.models import Role
from memory.models import MemoryType
from memory.services import memory_store
from tests.agents.factories import AgentFactory, ExecutionFactory
from tests.approvals.factories import ApprovalFactory
from tests.browser.conftest import (
    agency_member,
    logged_in,
    look_at_both_widths,
)
from tests.processes import AsgiServer
from tests.usage.factories import UsageDailyFactory

pytestmark = pytest.mark.slow


def test_a_memory_search_by_meaning_lists_the_best_match_first(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agency, user = agency_member(Role.STAFF)
    agent = AgentFactory.create(agency=agency, name="Front desk")
    facts = [  # the best match for the question is the oldest
        "Bob Martin from Globex is allergic to peanuts.",
        "Acme Corp renews its support contract every March.",
        "Quotes sent on Fridays are opened less often.",
        "Alice Moreau prefers to be contacted by e-mail, never by phone.",
    ]
    with tenancy.agency_context(agency.id):
        for fact in facts:
            memory_store(agent=agent, content=fact, memory_type=MemoryType.FACT)
    page = logged_in(browser, asgi_server, user).new_page()

    page.goto(
        f"{asgi_server.url}/admin/memory/memory/?agent__id__exact={agent.id}"
        "&q=Which+food+can%27t+Bob+eat%3F"
    )
    rows = page.locator("#result_list tbody tr")
    expect(rows.first).to_contain_text("allergic to peanuts")
    scores = [float(text) for text in page.locator("#result_list td.field-score").all_inner_texts()]
    assert len(scores) == len(facts)
    assert scores == sorted(scores, reverse=True), scores
    look_at_both_widths(page, "u1-memory-search")

    # The score column's old sort link (?o=8) is a list, not a server error.
    response = page.goto(f"{asgi_server.url}/admin/memory/memory/?o=8")
    assert response is not None
    assert response.status == 200
    expect(rows).to_have_count(len(facts))


def test_the_approvals_list_says_its_default_filter_hides_decided_ones(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agency, user = agency_member(Role.STAFF)
    execution = ExecutionFactory.create(agent=AgentFactory.create(agency=agency))
    decided = [ApprovalStatus.APPROVED, ApprovalStatus.DENIED, ApprovalStatus.EXPIRED]
    for status in [*decided, ApprovalStatus.APPROVED]:
        ApprovalFactory.create(
            tool_call__execution=execution, status=status, decided_at=timezone.now()
        )
    page = logged_in(browser, asgi_server, user).new_page()

    page.goto(f"{asgi_server.url}/admin/approvals/approval/")
    notice = page.locator("#approvals-pending-only")
    expect(notice).to_contain_text("Only pending approvals are listed, the default: 0 of 4.")
    # ...and the list itself says what would be listed, not the theme's "no results".
    empty = page.locator("#empty-state")
    expect(empty.get_by_role("heading")).to_have_text("No approval is waiting")
    expect(empty).to_contain_text("the run waits until an approver approves")
    expect(empty.get_by_role("link", name="Open the inbox")).to_have_attribute(
        "href", "/approvals/"
    )
    look_at_both_widths(page, "u1-approvals-pending-only")

    notice.get_by_role("link", name="Show all approvals").click()
    expect(page.locator("#result_list tbody tr")).to_have_count(4)
    expect(notice).to_have_count(0)
    look_at_both_widths(page, "u1-approvals-all")


EMPTY_PAGES = {  # a new agency's empty lists, and what each says
    "flow/completenessanalysis": "No run analysed yet",
    "tools/mcpserver": "No MCP server yet",
    "webhooks/webhook": "No webhook yet",
    "memory/memory": "No memory yet",
    "members/invitation": "No invitation yet",
    "usage/budget": "No budget yet",
    "approvals/approval": "No approval is waiting",
    "memory/memorychange": "No memory changed yet",
    "memory/investigation": "No investigation yet",
    "agents/agentmessage": "No agent message yet",
    "core/apikey": "No API key yet",
    "crm/calendarevent": "No calendar event yet",
    "crm/formsubmission": "No form submission yet",
}


def test_empty_lists_say_what_will_appear_and_how_to_start(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    _agency, user = agency_member(Role.ADMIN)
    page = logged_in(browser, asgi_server, user).new_page()

    for path, title in EMPTY_PAGES.items():
        page.goto(f"{asgi_server.url}/admin/{path}/")
        empty = page.locator("#empty-state")
        expect(empty.get_by_role("heading")).to_have_text(title)
        expect(empty).not_to_contain_text("yielded")
        look_at_both_widths(page, f"u1-empty-{path.replace('/', '-')}")

    # Completeness names where to start: the expected workflows, themselves empty with help.
    page.goto(f"{asgi_server.url}/admin/flow/completenessanalysis/")
    page.locator("#empty-state").get_by_role("link", name="Expected workflows").click()
    expect(page.locator("#empty-state h2")).to_have_text("No expected workflow yet")
    expect(page.locator("#empty-state")).to_contain_text("Add expected workflow")
    look_at_both_widths(page, "u1-empty-flow-expectedworkflow")


def test_breadcrumbs_and_columns_name_sections_as_the_sidebar_does(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agency, user = agency_member(Role.ADMIN)
    agent = AgentFactory.create(agency=agency)
    UsageDailyFactory.create(agent=agent, llm_calls=3)
    page = logged_in(browser, asgi_server, user).new_page()
    header = page.locator("#header-inner h1, h1").first

    # Events sit under "Agents & runs" in the sidebar: the breadcrumbs say the same.
    page.goto(f"{asgi_server.url}/admin/core/event/")
    expect(header).to_contain_text("Agents & runs")
    expect(header).not_to_contain_text("Agencies and access")
    expect(page.locator("#nav-sidebar, aside").first).to_contain_text("Agents & runs")
    look_at_both_widths(page, "u1-labels-events")

    page.goto(f"{asgi_server.url}/admin/usage/usagedaily/")
    expect(header).to_contain_text("Usage & budgets")
    expect(header).to_contain_text("Daily usage")
    columns = page.locator("#result_list thead").inner_text()
    for label in ("LLM calls", "Cost", "Input tokens"):
        assert label in columns, columns
    assert "Llm calls" not in columns
    expect(page.get_by_text("1 daily usage row", exact=True)).to_be_visible()
    look_at_both_widths(page, "u1-labels-daily-usage")
