"""The audit log's admin list and an entry's page, in Chromium at 1440 and 390 px (screenshots
a1-*): an agency admin finds a change by searching, and reads its before and after."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from agents.services.agents import agent_update
from audit.context import Actor, actor_context
from audit.models import ActorType, AuditEntry
from core import tenancy
from core.models import Role
from tests.agents.factories import AgentFactory
from tests.browser.conftest import agency_member, logged_in, look_at_both_widths
from tests.processes import AsgiServer

pytestmark = pytest.mark.slow


def test_an_admin_finds_a_prompt_change_in_the_audit_log(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agency, user = agency_member(Role.ADMIN)
    agent = AgentFactory.create(agency=agency, name="Lead qualifier", system_prompt="Be brief.")
    person = Actor(ActorType.USER, user_id=user.pk, display=user.username, ip="192.0.2.10")
    with actor_context(person), tenancy.agency_context(agency.pk):
        agent_update(agent=agent, system_prompt="Be thorough, and cite the CRM.")
        entry = AuditEntry.objects.filter(action="agent.updated").latest("seq")
    page = logged_in(browser, asgi_server, user).new_page()

    page.goto(f"{asgi_server.url}/admin/audit/auditentry/?q=Lead+qualifier")
    expect(page.locator("#result_list")).to_contain_text("agent.updated")
    look_at_both_widths(page, "a1-audit-log", phone_fits=False)

    page.goto(f"{asgi_server.url}/admin/audit/auditentry/{entry.pk}/change/")
    expect(page.locator("body")).to_contain_text("Be thorough, and cite the CRM.")
    look_at_both_widths(page, "a1-audit-entry", phone_fits=False)
