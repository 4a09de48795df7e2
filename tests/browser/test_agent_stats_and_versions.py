"""The agent page's numbers and its versions in Chromium (issue 27 items 2 and 3): "Runs & stats"
counts the runs the list of its executions shows, "This agent today" includes a run still going
that cost money, and a save from the form that changed the prompt and the temperature lists
those two in the versions' diff and the restore preview, not the untouched personality (the
browser posts a textarea's line breaks as CRLF). Screenshots: .data/screenshots/agent-*.png."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from agents.models import Agent, AgentVersion, ExecutionStatus
from agents.services import agent_create
from core import tenancy
from core.models import Role
from tests.admin.test_agent_stats_tab import _run
from tests.browser.conftest import DESKTOP, PHONE, logged_in, screenshot
from tests.factories import AgencyFactory, MembershipFactory, SiteFactory
from tests.processes import AsgiServer

pytestmark = pytest.mark.slow

PERSONALITY = "You are Alex, a helpful assistant.\nFriendly but professional.\nBrief."
PROMPT = "Help the user get their work done.\nAsk when a request is ambiguous."


def _at_both_widths(page: Page, name: str, show: Any = None) -> None:
    """Screenshots of the page as it is at 1440 and 390 px (``show``: re-opens what a reload
    closes), with no sideways scroll at either."""
    for size, suffix in ((DESKTOP, "desktop"), (PHONE, "phone")):
        page.set_viewport_size(size)
        page.reload()
        if show is not None:
            show()
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= size["width"], f"{page.url} scrolls sideways at {size['width']} ({width})"
        screenshot(page, f"{name}-{suffix}")
    page.set_viewport_size(DESKTOP)


def _tab(page: Page, name: str) -> None:
    """Opens one of the editor's tabs (unfold's: anchors without an address)."""
    label = re.compile(rf"^\s*{re.escape(name)}\s*$")
    page.locator("a[x-on\\:click]", has_text=label).first.click()


def _expect_fields(page: Page, names: list[str]) -> None:
    """The diff on the page lists exactly these fields (the personality was listed too)."""
    fields = page.locator(".version-diff-field")
    expect(fields).to_have_count(len(names))
    assert [fields.nth(i).get_attribute("data-field") for i in range(len(names))] == names


def test_the_agent_pages_runs_and_todays_spend_agree_with_its_runs(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agency = AgencyFactory.create()
    site = SiteFactory.create(agency=agency)
    user = MembershipFactory.create(agency=agency, role=Role.ADMIN).user
    with tenancy.agency_context(agency.pk):
        agent = agent_create(agency_id=agency.pk, site=site, name="Alex", agent_type="assistant")
    _run(agent, ExecutionStatus.COMPLETED, "0.000412")
    _run(agent, ExecutionStatus.COMPLETED, "0.000300")
    _run(agent, ExecutionStatus.FAILED, "0.000100")
    _run(agent, ExecutionStatus.WAITING_INPUT, "0.000250")  # it asked a person: still going
    page = logged_in(browser, asgi_server, user).new_page()
    page.goto(f"{asgi_server.url}/admin/agents/agent/{agent.pk}/change/")

    _tab(page, "Runs & stats")
    runs = page.locator("[data-agent-runs]")
    expect(runs).to_have_text("4 runs: 1 waiting for input · 2 completed · 1 failed")
    expect(page.locator("[data-agent-run-totals]")).to_have_text(
        "4000 tokens, $0.001062, 0 tool calls"
    )
    expect(page.get_by_text("Total runs", exact=True)).to_have_count(0)
    _at_both_widths(page, "agent-runs-stats", lambda: _tab(page, "Runs & stats"))
    runs.get_by_role("link", name="4 runs").click()
    expect(page.locator("#result_list tbody tr")).to_have_count(4)  # the same runs, listed

    page.go_back()
    _tab(page, "Limits & budget")
    expect(page.locator("[data-agent-spend-today]")).to_have_text(
        "$0.001062 for its runs (3 ended, 1 still going: $0.00025 so far)"
    )
    _at_both_widths(page, "agent-budget-today", lambda: _tab(page, "Limits & budget"))


def test_a_save_from_the_form_lists_only_what_changed_in_the_diff_and_the_restore_preview(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agency = AgencyFactory.create()
    site = SiteFactory.create(agency=agency)
    user = MembershipFactory.create(agency=agency, role=Role.ADMIN).user
    with tenancy.agency_context(agency.pk):
        agent = agent_create(
            agency_id=agency.pk,
            site=site,
            name="Alex",
            agent_type="assistant",
            personality=PERSONALITY,
            system_prompt=PROMPT,
            temperature=Decimal("0.70"),
        )
    page = logged_in(browser, asgi_server, user).new_page()
    change = f"{asgi_server.url}/admin/agents/agent/{agent.pk}/change/"
    page.goto(change)

    prompt = page.locator("textarea[name=system_prompt]")
    prompt.fill(prompt.input_value() + "\nBe brief.")
    _tab(page, "Model")
    page.locator("input[name=temperature]").fill("0.40")
    page.locator("button[name=_continue]").first.click()
    expect(page.locator(".errornote")).to_have_count(0)
    with tenancy.agency_context(agency.pk):
        assert AgentVersion.objects.filter(agent=agent).count() == 2
        assert Agent.objects.get(pk=agent.pk).personality == PERSONALITY

    page.goto(f"{change.removesuffix('change/')}versions/")
    expect(page.get_by_text("Version 1 → version 2")).to_be_visible()
    _expect_fields(page, ["system_prompt", "temperature"])
    _at_both_widths(page, "agent-versions-diff")

    page.goto(f"{change.removesuffix('change/')}versions/1/restore/")
    _expect_fields(page, ["system_prompt", "temperature"])
    _at_both_widths(page, "agent-version-restore")
