"""The evaluation budget's pages in Chromium (issue 28): the empty list says what an evaluation
budget is (the LLM judge's daily limit, apart from the runs'); an agency admin adds one in the
form (the day it starts, the limit) and the list shows it with today's spend against it.
Screenshots at 1440 and 390 px: .data/screenshots/evaluation-budget-*.png."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from core import tenancy
from core.models import Role
from tests.browser.conftest import DESKTOP, PHONE, logged_in, screenshot
from tests.factories import AgencyFactory, MembershipFactory
from tests.processes import AsgiServer
from usage.models import EvaluationBudget

pytestmark = pytest.mark.slow


def _at_both_widths(page: Page, name: str) -> None:
    """Full-page screenshots at 1440 and 390 px, no sideways scroll at either."""
    for size in (DESKTOP, PHONE):
        page.set_viewport_size(size)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= size["width"], f"{name} scrolls sideways at {size['width']} px ({width})"
        screenshot(page, f"{name}-{size['width']}")
    page.set_viewport_size(DESKTOP)


def test_an_agency_admin_sets_the_evaluation_budget_and_reads_it_back(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agency = AgencyFactory.create()
    user = MembershipFactory.create(agency=agency, role=Role.ADMIN).user
    page = logged_in(browser, asgi_server, user).new_page()
    base = f"{asgi_server.url}/admin/usage/evaluationbudget/"

    page.goto(base)
    empty = page.locator("#empty-state")
    expect(empty.get_by_role("heading")).to_have_text("No evaluation budget yet")
    expect(empty).to_contain_text("apart from the runs' budget")
    _at_both_widths(page, "evaluation-budget-empty")

    page.goto(f"{base}add/")
    expect(page.get_by_text("Daily evaluation limit", exact=True)).to_be_visible()
    expect(page.get_by_text("evaluation budget exhausted")).to_be_visible()
    _at_both_widths(page, "evaluation-budget-add")
    page.get_by_label("Daily evaluation limit (USD)").fill("2.50")
    page.get_by_role("button", name="Save", exact=True).click()

    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    row = page.locator("#result_list tbody tr").first
    expect(row.locator("td.field-daily_limit")).to_have_text("$2.50")
    expect(row.locator("td.field-left")).to_have_text("$2.50")
    _at_both_widths(page, "evaluation-budget-list")
    with tenancy.agency_context(agency.id):
        assert EvaluationBudget.objects.get(agency=agency).limit_usd == Decimal("2.50")
