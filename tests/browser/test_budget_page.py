"""The budget pages in Chromium (issue 27 item 10): the list says what a budget is (a daily
limit that recurs, what counts) and today's spend against it; the form asks for the day it
starts and the limit, not the runtime's counters. Screenshots: .data/screenshots/budget-*.png."""

from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from core import tenancy
from core.models import Role
from tests.browser.conftest import DESKTOP, PHONE, logged_in, screenshot
from tests.factories import AgencyFactory, MembershipFactory
from tests.processes import AsgiServer
from usage.models import Budget, today

pytestmark = pytest.mark.slow
COUNTERS = ("Reserved", "Invocations", "Executions started", "Executions completed", "Used usd")


def _at_both_widths(page: Page, url: str, name: str) -> None:
    for size, suffix in ((DESKTOP, "desktop"), (PHONE, "phone")):
        page.set_viewport_size(size)
        page.goto(url)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= size["width"], f"{url} scrolls sideways at {size['width']} px ({width})"
        screenshot(page, f"{name}-{suffix}")
    page.set_viewport_size(DESKTOP)


def test_the_budget_list_says_what_a_budget_is_and_todays_spend_against_it(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agency = AgencyFactory.create()
    user = MembershipFactory.create(agency=agency, role=Role.ADMIN).user
    with tenancy.agency_context(agency.pk):
        Budget.objects.create(
            agency=agency, date=today() - datetime.timedelta(days=3), limit_usd=Decimal(5)
        )
        # Today's row, as the runtime makes it from the latest limit at the day's first call.
        current = Budget.objects.create(
            agency=agency,
            date=today(),
            limit_usd=Decimal(5),
            used_usd=Decimal("1.25"),
            executions_started=4,
            invocations_count=4,
        )
    page = logged_in(browser, asgi_server, user).new_page()
    base = f"{asgi_server.url}/admin/usage/budget/"

    _at_both_widths(page, base, "budget-list")
    expect(page.locator("[data-budget-today]")).to_contain_text("$1.25 spent of $5.00 (25 %)")
    expect(page.locator("[data-budget-today]")).to_contain_text("$3.75 left today")
    about = page.locator("[data-budget-about]")
    expect(about).to_contain_text("daily limit")
    expect(about).to_contain_text("every day after it")
    expect(about).to_contain_text("model calls")
    expect(about).not_to_contain_text("budget_exceeded")  # in words: "Daily budget exceeded"
    headers = page.locator("#result_list thead").inner_text()
    assert "Spent that day" in headers
    assert not [c for c in COUNTERS if c.lower() in headers.lower()], headers

    _at_both_widths(page, f"{base}add/", "budget-add")
    form = page.locator("form#budget_form")
    expect(form).to_contain_text("Starts on")
    expect(form).to_contain_text("Daily limit (USD)")
    expect(form).to_contain_text("every day, until a budget starting on a later day")
    assert not [c for c in COUNTERS if c.lower() in form.inner_text().lower()]
    assert page.locator("input[name=date]").input_value()  # today, filled in

    _at_both_widths(page, f"{base}{current.pk}/change/", "budget-change")
    form = page.locator("form#budget_form")
    expect(form).to_contain_text("Spent that day")
    expect(form).to_contain_text("$1.25 (25 %)")
    assert not [c for c in COUNTERS if c.lower() in form.inner_text().lower()]


def test_a_new_agencys_budget_pages_explain_once_in_words_and_the_form_has_a_heading(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agency = AgencyFactory.create()
    user = MembershipFactory.create(agency=agency, role=Role.ADMIN).user
    page = logged_in(browser, asgi_server, user).new_page()
    base = f"{asgi_server.url}/admin/usage/budget/"

    _at_both_widths(page, base, "u8-budget-list-empty")
    # Explained once: the empty state, not a card beside it saying the same.
    expect(page.locator("[data-budget-about]")).to_have_count(0)
    empty = page.locator("#empty-state")
    expect(empty.get_by_role("heading")).to_have_text("No budget yet")
    expect(empty).to_contain_text("every day after it")
    expect(page.locator("[data-budget-today]")).not_to_contain_text("Add budget")
    assert "budget_exceeded" not in page.locator("#main, main").first.inner_text()

    _at_both_widths(page, f"{base}add/", "u8-budget-add")
    form = page.locator("form#budget_form")
    expect(form.get_by_role("heading", name="Daily spending limit")).to_be_visible()
    expect(form).to_contain_text('stops, marked "Daily budget exceeded"')
    assert "budget_exceeded" not in form.inner_text()
