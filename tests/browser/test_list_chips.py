"""Lists with what people reach for (issue 27 item 15): status chips above the executions and
agents lists and the inbox, and "Approve selected" for the inbox's low-risk actions. Each page
at 1440 and 390 px (no sideways scroll). Screenshots: .data/screenshots/chips-*.png."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from agents.models import ExecutionStatus
from approvals.models import Approval, ApprovalStatus, RiskLevel
from core import tenancy
from core.models import Role
from tests.agents.factories import AgentFactory, ExecutionFactory
from tests.approvals.inbox_helpers import waiting_approval
from tests.browser.conftest import DESKTOP, PHONE, logged_in, screenshot
from tests.factories import AgencyFactory, MembershipFactory
from tests.processes import AsgiServer

pytestmark = pytest.mark.slow


def _at_both_widths(page: Page, name: str) -> None:
    screenshot(page, f"{name}-desktop")
    page.set_viewport_size(PHONE)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"{page.url} scrolls sideways at 390 px ({width} px)"
    screenshot(page, f"{name}-phone")
    page.set_viewport_size(DESKTOP)


def _status(approval: Approval) -> str:
    with tenancy.agency_context(approval.agency_id):
        return Approval.objects.get(pk=approval.pk).status


def test_chips_narrow_the_lists_and_low_risk_actions_are_approved_together(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agency = AgencyFactory.create()
    sdr = AgentFactory.create(agency=agency, name="SDR Agent")
    AgentFactory.create(agency=agency, site=sdr.site, name="Old Agent", is_active=False)
    for status in (ExecutionStatus.RUNNING, ExecutionStatus.FAILED, ExecutionStatus.COMPLETED):
        ExecutionFactory.create(agent=sdr, status=status)
    low = [waiting_approval(agency, agent=sdr, risk=RiskLevel.LOW) for _ in range(3)]
    high = waiting_approval(agency, agent=sdr, risk=RiskLevel.HIGH)
    user = MembershipFactory.create(agency=agency, role=Role.ADMIN).user
    page = logged_in(browser, asgi_server, user).new_page()
    rows = page.locator("#result_list tbody tr")

    page.goto(f"{asgi_server.url}/admin/agents/execution/")
    chips = page.locator(".list-chips")
    expect(chips.locator("a", has_text="Waiting")).to_contain_text("4")
    expect(rows).to_have_count(7)
    chips.locator("a", has_text="Failed").click()
    expect(rows).to_have_count(1)
    expect(chips.locator("[aria-current=true]")).to_contain_text("Failed 1")
    _at_both_widths(page, "chips-executions-failed")

    page.goto(f"{asgi_server.url}/admin/agents/agent/")
    page.locator(".list-chips a", has_text="Paused").click()
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("Old Agent")
    _at_both_widths(page, "chips-agents-paused")

    page.goto(f"{asgi_server.url}/approvals/")
    page.locator(".list-chips a", has_text="Low").click()
    cards = page.locator(".inbox-card")
    expect(cards).to_have_count(3)
    expect(page.locator(".list-chips [aria-current=true]")).to_contain_text("Low 3")
    _at_both_widths(page, "chips-inbox-low")
    page.locator(f"input[data-pick][value='{low[0].pk}']").check()
    page.locator(f"input[data-pick][value='{low[1].pk}']").check()
    # A live refresh of the list (what a run starting or stopping to wait sends) keeps the ticks.
    page.evaluate("document.querySelector('.inbox-cards').dataset.before = 'refresh'")
    page.evaluate("document.body.dispatchEvent(new CustomEvent('inbox-update'))")
    expect(page.locator(".inbox-cards[data-before]")).to_have_count(0)  # swapped in anew
    expect(page.locator("input[data-pick]:checked")).to_have_count(2)
    page.locator('[data-action="approve-selected"]').click()
    expect(page.get_by_text("Approved 2 low-risk actions.")).to_be_visible()
    _at_both_widths(page, "chips-inbox-approved")
    assert [_status(a) for a in (*low, high)] == [
        ApprovalStatus.APPROVED,
        ApprovalStatus.APPROVED,
        ApprovalStatus.PENDING,
        ApprovalStatus.PENDING,
    ]
    # Only low-risk actions can be picked: the high-risk one has no box.
    page.goto(f"{asgi_server.url}/approvals/")
    expect(page.locator(f".inbox-card[data-id='{high.pk}'] input[data-pick]")).to_have_count(0)
    expect(page.locator("input[data-pick]")).to_have_count(1)
