"""The run page's "Agent messages" section in headless Chromium, at desktop and phone widths:
the delegating run's page links to the delegated run's, which links back."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from agents.models import ExecutionStatus, MessageType, TriggerType
from core.models import Role
from tests.agents.factories import AgentFactory, AgentMessageFactory, ExecutionFactory
from tests.browser.conftest import DESKTOP, PHONE, browser, logged_in, screenshot
from tests.factories import AgencyFactory, MembershipFactory, SiteFactory
from tests.processes import AsgiServer

pytestmark = pytest.mark.slow
__all__ = ["browser"]


def test_the_messages_link_the_two_runs_both_ways(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agency = AgencyFactory.create()
    site = SiteFactory.create(agency=agency)
    staff = MembershipFactory.create(agency=agency, role=Role.STAFF).user
    lead = AgentFactory.create(agency=agency, site=site, slug="lead", name="Lead")
    helper = AgentFactory.create(agency=agency, site=site, slug="helper-research")
    parent = ExecutionFactory.create(agent=lead, status=ExecutionStatus.COMPLETED)
    child = ExecutionFactory.create(
        agent=helper, parent=parent, depth=1, trigger_type=TriggerType.AGENT,
        status=ExecutionStatus.COMPLETED,
    )  # fmt: skip
    request = AgentMessageFactory.create(
        from_execution=parent, to_execution=child, to_agent=helper,
        content={"instruction": "When does Ada's contract renew? Look at her notes and e-mails."},
    )  # fmt: skip
    AgentMessageFactory.create(
        from_execution=child, to_execution=parent, from_agent=helper, to_agent=lead,
        message_type=MessageType.RESULT, is_request=False, in_response_to=request,
        content={"output": "It renews on 2027-01-31."},
    )  # fmt: skip

    for size, name in ((DESKTOP, "desktop"), (PHONE, "phone")):
        context = logged_in(browser, asgi_server, staff)
        page = context.new_page()
        page.set_viewport_size(size)
        page.goto(f"{asgi_server.url}/admin/agents/execution/{parent.id}/change/")
        table = page.locator("table.agent-messages")
        expect(table.locator("tbody tr")).to_have_count(2)
        expect(table).to_contain_text("It renews on 2027-01-31.")
        screenshot(page, f"teams-run-messages-{name}")
        table.locator(f'a[href$="/{child.id}/change/"]').first.click()
        page.wait_for_url(f"**/{child.id}/change/")
        back = page.locator("table.agent-messages")
        expect(back.locator(f'a[href$="/{parent.id}/change/"]')).to_have_count(2)
        context.close()
