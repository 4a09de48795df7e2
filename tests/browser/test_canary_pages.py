"""Canary versions in Chromium (issue 28): the agent page's Canary panel (Runs & stats), the
staff home's "Canary versions" card, the canary's page with Promote and Stop, and the inbox's
notice of a rollback, at 1440 and 390 px with no sideways scroll. Screenshots:
.data/screenshots/canary-*.png."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from agents.models import ExecutionStatus
from agents.services import agent_update, agent_version_restore
from core import tenancy
from core.models import Role
from evals.services.canaries import canary_evaluate, canary_start
from tests.agents.factories import AgentFactory, ExecutionFactory
from tests.browser.conftest import agency_member, logged_in, look_at_both_widths
from tests.factories import SiteFactory
from tests.processes import AsgiServer

pytestmark = pytest.mark.slow


def test_a_canarys_figures_show_on_the_agent_page_the_home_and_its_page_and_a_rollback_in_the_inbox(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agency, user = agency_member(Role.STAFF)
    site = SiteFactory.create(agency=agency)
    with tenancy.agency_context(agency.id):
        agent = AgentFactory.create(agency=agency, site=site, name="Support triage")
        agent_update(agent=agent, system_prompt="Answer the customer.")
        first = agent.current_version
        assert first is not None
        agent_update(agent=agent, system_prompt="Answer the customer in two sentences.")
        candidate = agent.current_version
        assert candidate is not None
        stable = agent_version_restore(agent=agent, version=first)
        canary = canary_start(agent=agent, candidate=candidate, share=10, min_runs=5)
        for status, cost in [(ExecutionStatus.COMPLETED, "0.0120")] * 4 + [
            (ExecutionStatus.FAILED, "0.0090")
        ]:
            ExecutionFactory.create(
                agent=agent, agent_version=stable, status=status,
                cost_usd=Decimal(cost), llm_call_count=4,
            )  # fmt: skip
        ExecutionFactory.create(
            agent=agent, agent_version=candidate, status=ExecutionStatus.COMPLETED,
            cost_usd=Decimal("0.0081"), llm_call_count=3,
        )  # fmt: skip
    context = logged_in(browser, asgi_server, user)
    page = context.new_page()

    page.goto(f"{asgi_server.url}/admin/")
    card = page.locator("#home-canaries")
    expect(card).to_contain_text("Canary versions")
    expect(card).to_contain_text("Support triage")
    expect(card).to_contain_text("Candidate (v2)")
    expect(card).to_contain_text("20%")  # stable's failure rate: 1 of 5
    look_at_both_widths(page, "canary-home")

    page.goto(f"{asgi_server.url}/admin/agents/agent/{agent.pk}/change/")
    page.locator("a[x-on\\:click]", has_text=re.compile(r"^\s*Runs & stats\s*$")).first.click()
    expect(page.get_by_text("Version 2 takes 10 % of new runs")).to_be_visible()
    panel = page.locator(".canary-figures")
    expect(panel).to_contain_text("Stable (v3)")
    expect(panel).to_contain_text("$0.0081")
    panel.scroll_into_view_if_needed()
    look_at_both_widths(page, "canary-agent-page")

    page.get_by_role("link", name="Open the canary (promote or stop)").click()
    expect(page.get_by_role("button", name="Promote the candidate")).to_be_visible()
    expect(page.get_by_role("button", name="Stop the canary")).to_be_visible()
    look_at_both_widths(page, "canary-page")

    with tenancy.agency_context(agency.id):
        for _ in range(5):
            ExecutionFactory.create(
                agent=agent, agent_version=candidate, status=ExecutionStatus.FAILED
            )
        assert canary_evaluate(canary_id=canary.pk) == "rolled_back"
    page.goto(f"{asgi_server.url}/approvals/")
    notice = page.locator(".inbox-notices")
    expect(notice).to_contain_text("Support triage: canary of version 2 rolled back")
    expect(notice).to_contain_text("Rolled back by itself: failure rate")
    look_at_both_widths(page, "canary-inbox-notice")
    notice.get_by_role("link").first.click()
    expect(page.locator("#content")).to_contain_text("Rolled back")
    look_at_both_widths(page, "canary-rolled-back")
    context.close()
