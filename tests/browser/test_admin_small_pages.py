"""Small admin pages issue 27's second review found rough, in Chromium at 1440 and 390 px
(screenshots u8-*, none scrolling sideways on a phone): the MCP server form's labels in words,
the events list's sources in words with what each is about linked, and the home's runs chart
saying which runs it counts."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from agents.models import ExecutionStatus
from core import tenancy
from core.models import Agency, Event, Role, User
from tests.agents.factories import AgentFactory, ExecutionFactory
from tests.browser.conftest import DESKTOP, PHONE, logged_in, screenshot
from tests.crm.factories import ContactFactory
from tests.factories import AgencyFactory, MembershipFactory
from tests.processes import AsgiServer
from tests.usage.factories import UsageDailyFactory

pytestmark = pytest.mark.slow
SCREENS = Path("/work/notes/u8-screens")


def _member(role: str) -> tuple[Agency, User]:
    agency = AgencyFactory.create(slug=f"small-{uuid.uuid4().hex[:8]}")
    return agency, MembershipFactory.create(agency=agency, role=role).user


def _look(page: Page, name: str) -> None:
    """Screenshots at both widths (into the notes too); no sideways scroll on a phone."""
    SCREENS.mkdir(parents=True, exist_ok=True)
    for viewport, width_name in ((DESKTOP, "1440"), (PHONE, "390")):
        page.set_viewport_size(viewport)
        if viewport is PHONE:
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= PHONE["width"], f"{name} scrolls sideways on a phone ({width} px)"
        path = screenshot(page, f"u8-{name}-{width_name}")
        (SCREENS / path.name).write_bytes(path.read_bytes())
    page.set_viewport_size(DESKTOP)


def test_the_mcp_server_form_says_timeout_in_seconds_as_the_agent_form_does(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    _agency, user = _member(Role.ADMIN)
    page = logged_in(browser, asgi_server, user).new_page()
    page.goto(f"{asgi_server.url}/admin/tools/mcpserver/add/")
    label = page.locator("label[for=id_timeout_seconds]")
    expect(label).to_contain_text("Timeout (seconds)")  # it said "Timeout seconds"
    _look(page, "mcp-add")


def test_the_events_list_names_sources_in_words_and_links_what_each_is_about(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agency, user = _member(Role.ADMIN)
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
    _look(page, "events")


def test_the_homes_runs_chart_says_it_counts_runs_that_ended(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agency, user = _member(Role.STAFF)
    agent = AgentFactory.create(agency=agency)
    for status in (ExecutionStatus.COMPLETED, ExecutionStatus.FAILED, ExecutionStatus.RUNNING):
        ExecutionFactory.create(agent=agent, status=status)
    UsageDailyFactory.create(agent=agent, agent_runs=2)  # written as each run ended
    page = logged_in(browser, asgi_server, user).new_page()

    page.goto(f"{asgi_server.url}/admin/")
    # It said "Runs, last 14 days: 2" while the executions list said "All 3".
    expect(page.locator("#home-charts")).to_contain_text("Runs ended, last 14 days: 2")
    _look(page, "home")
    page.goto(f"{asgi_server.url}/admin/agents/execution/")
    _look(page, "executions")
    page.goto(f"{asgi_server.url}/admin/usage/usagedaily/")
    expect(page.get_by_text("Runs ended: 2")).to_be_visible()  # its chart counts the same
    _look(page, "daily-usage")
