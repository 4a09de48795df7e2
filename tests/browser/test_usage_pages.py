"""The usage pages read well (issue 27 item 3): the usage periods list says what a usage period
is and how one appears while it has none (it said "This page yielded into no results" under an
"Export CSV" of nothing), and names its columns and a period's fields in words ("Total agent
runs", raw provider keys); daily usage names a provider as the LLM providers page does
("OpenAI-compatible (local)", not ``openai_compatible``) and counts its rows as rows (it said
"3 days of usage" for three rows of one day). Screenshots at 1440 and 390 px in
.data/screenshots/usage-*."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from agents.models import ProviderName
from tests.agents.factories import AgentFactory
from tests.browser.conftest import (
    agency_member,
    logged_in,
    look_at_both_widths,
)
from tests.browser.test_admin_labels import raw_labels
from tests.processes import AsgiServer
from tests.usage.factories import UsageDailyFactory, UsagePeriodFactory

pytestmark = pytest.mark.slow


def _texts(page: Page, selector: str) -> list[str]:
    """Each element's first line (a sorted column's icons follow its name)."""
    texts = page.locator(selector).all_inner_texts()
    return [text.strip().split("\n")[0] for text in texts if text.strip()]


def test_an_empty_usage_periods_list_says_what_a_period_is_and_how_one_appears(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    _, user = agency_member()
    page = logged_in(browser, asgi_server, user).new_page()
    page.goto(f"{asgi_server.url}/admin/usage/usageperiod/")

    empty = page.locator("#empty-state")
    expect(empty.get_by_role("heading")).to_have_text("No usage period yet")
    expect(empty).to_contain_text("billing period")
    expect(empty).to_contain_text("recorded by the platform's operator")
    expect(empty.get_by_role("link", name="Daily usage")).to_have_attribute(
        "href", "/admin/usage/usagedaily/"
    )
    expect(page.get_by_text("This page yielded into no results")).to_have_count(0)
    expect(page.get_by_text("Export CSV")).to_have_count(0)  # of nothing
    look_at_both_widths(page, "usage-periods-empty")


def test_a_usage_period_reads_in_words(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agency, user = agency_member()
    period = UsagePeriodFactory.create(
        agency=agency, total_agent_runs=12, total_tokens_input=30_000, total_tokens_output=15_200,
        total_tool_calls=31, total_approvals=2, estimated_cost=Decimal("0.42"),
        usage_by_provider={"openai_compatible": {"runs": 12, "cost_usd": "0.42"}},
    )  # fmt: skip
    page = logged_in(browser, asgi_server, user).new_page()
    page.goto(f"{asgi_server.url}/admin/usage/usageperiod/")

    columns = _texts(page, "#result_list thead th")
    assert columns == [
        "Period", "Site", "Runs", "Tokens", "Tool calls", "Approvals", "Estimated cost",
        "Over the quota",
    ], columns  # fmt: skip
    row = page.locator("#result_list tbody tr").first
    expect(row.locator("td.field-runs")).to_have_text("12 of 500 included")
    expect(row.locator("td.field-tokens")).to_have_text("45.2k of 500k included")
    expect(row.locator("td.field-cost")).to_have_text("$0.42")
    expect(row.locator("td.field-overage")).to_have_text("None")
    expect(row.locator("td.field-site_shown")).to_have_text("All sites")
    look_at_both_widths(page, "usage-periods")

    page.goto(f"{asgi_server.url}/admin/usage/usageperiod/{period.pk}/change/")
    labels = _texts(page, "#usageperiod_form label")
    assert len(labels) >= 12, labels
    assert raw_labels(labels) == [], labels
    assert "Total agent runs" not in labels
    expect(page.locator("#usageperiod_form")).to_contain_text("OpenAI-compatible (local)")
    expect(page.locator("#usageperiod_form")).not_to_contain_text("openai_compatible")
    look_at_both_widths(page, "usage-period")


def test_daily_usage_names_providers_and_counts_rows(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agency, user = agency_member()
    for name in ("Writer", "Triage", "Scorer"):  # three rows of one day
        UsageDailyFactory.create(
            agent=AgentFactory.create(agency=agency, name=name),
            provider=ProviderName.OPENAI_COMPATIBLE,
            model="demo-model",
            agent_runs=1,
            cost_usd=Decimal("0.000412"),
        )
    page = logged_in(browser, asgi_server, user).new_page()
    page.goto(f"{asgi_server.url}/admin/usage/usagedaily/")

    cells = page.locator("#result_list tbody td.field-provider")
    expect(cells).to_have_count(3)
    expect(cells.first).to_have_text("OpenAI-compatible (local)")
    expect(page.locator("#result_list")).not_to_contain_text("openai_compatible")
    expect(page.get_by_text("3 daily usage rows")).to_be_visible()
    expect(page.get_by_text("3 days of usage")).to_have_count(0)
    look_at_both_widths(page, "usage-daily")
