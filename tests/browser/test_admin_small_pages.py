"""Small admin pages issue 27's second review found rough, in Chromium at 1440 and 390 px
(screenshots u8-*, none scrolling sideways on a phone): the MCP server form's labels in words,
the events list's sources in words with what each is about linked, and the home's runs chart
saying which runs it counts."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from agents.models import ExecutionStatus
from core import tenancy
from core.models import Event, Role
from tests.agents.factories import AgentFactory, ExecutionFactory
from tests.browser.conftest import (
    agency_member,
    logged_in,
    look_at_both_widths,
)
from tests.crm.factories import ContactFactory
from tests.processes import AsgiServer
from tests.usage.factories import UsageDailyFactory

pytestmark = pytest.mark.slow


def test_the_mcp_server_form_says_timeout_in_seconds_as_the_agent_form_does(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    _agency, user = agency_member(Role.ADMIN)
    page = logged_in(browser, asgi_server, user).new_page()
    page.goto(f"{asgi_server.url}/admin/tools/mcpserver/add/")
    label = page.locator("label[for=id_timeout_seconds]")
    expect(label).to_contain_text("Timeout (seconds)")  # it said "Timeout seconds"
    look_at_both_widths(page, "u8-mcp-add")


def test_the_events_list_names_sources_in_words_and_links_what_each_is_about(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agency, user = agency_member(Role.ADMIN)
    with tenancy.agency_context(agency.id):
        execution = ExecutionFactory.create(agent=AgentFactory.create(agency=agency))
        contact = ContactFactory.create(agency=agency, site=execution.site)
        for module, kind, entity_id, event_type in (
            ("agents", "execution", execution.pk, "ai.execution.completed"),
            ("crm", "contact", contact.pk, "crm.contact.created"),
        ):
            Event.objects.create(
                agency=agency, event_type=event_type, source_module=module,
                source_entity_type=kind, source_entity_id=str(entity_id),
            )  # fmt: skip
    page = logged_in(browser, asgi_server, user).new_page()
    page.goto(f"{asgi_server.url}/admin/core/event/")

    rows = page.locator("#result_list tbody tr")
    run_row = rows.filter(has_text="ai.execution.completed")
    expect(run_row.locator("td.field-source")).to_have_text("Agents")
    expect(run_row.get_by_role("link", name=f"Run {str(execution.pk)[:8]}")).to_have_attribute(
        "href", f"/admin/agents/execution/{execution.pk}/change/"
    )
    contact_row = rows.filter(has_text="crm.contact.created")
    expect(contact_row.locator("td.field-source")).to_have_text("CRM")  # it said "crm"
    contact_row.get_by_role("link", name=f"Contact {str(contact.pk)[:8]}").click()
    expect(page).to_have_url(f"{asgi_server.url}/admin/crm/contact/{contact.pk}/change/")
    page.go_back()
    expect(page.locator("#changelist-filter, [data-filter]").first).to_be_attached()
    look_at_both_widths(page, "u8-events")


def test_the_homes_runs_chart_says_it_counts_runs_that_ended(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agency, user = agency_member(Role.STAFF)
    agent = AgentFactory.create(agency=agency)
    for status in (ExecutionStatus.COMPLETED, ExecutionStatus.FAILED, ExecutionStatus.RUNNING):
        ExecutionFactory.create(agent=agent, status=status)
    UsageDailyFactory.create(agent=agent, agent_runs=2)  # written as each run ended
    page = logged_in(browser, asgi_server, user).new_page()

    page.goto(f"{asgi_server.url}/admin/")
    # It said "Runs, last 14 days: 2" while the executions list said "All 3".
    expect(page.locator("#home-charts")).to_contain_text("Runs ended, last 14 days: 2")
    look_at_both_widths(page, "u8-home")
    page.goto(f"{asgi_server.url}/admin/agents/execution/")
    look_at_both_widths(page, "u8-executions")
    page.goto(f"{asgi_server.url}/admin/usage/usagedaily/")
    expect(page.get_by_text("Runs ended: 2")).to_be_visible()  # its chart counts the same
    look_at_both_widths(page, "u8-daily-usage")
