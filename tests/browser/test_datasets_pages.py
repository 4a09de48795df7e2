"""A dataset's admin page (its inferred schema, the columns' descriptions) and a run's table
results on its run page, in Chromium at 1440 and 390 px (screenshots s1-*)."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from agents.models import ExecutionStatus
from core.models import Role
from tests.agents.factories import ExecutionFactory
from tests.browser.conftest import agency_member, logged_in, look_at_both_widths
from tests.datasets.factories import DatasetResultFactory
from tests.datasets.helpers import upload
from tests.processes import AsgiServer

pytestmark = pytest.mark.slow


def test_a_datasets_schema_and_a_runs_table_results(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agency, user = agency_member(Role.STAFF)
    dataset = upload(agency)
    run = ExecutionFactory.create(agent__agency=agency, status=ExecutionStatus.COMPLETED)
    DatasetResultFactory.create(
        execution=run,
        sql='SELECT region, SUM(amount) AS total FROM datasets."sales" GROUP BY region',
        columns=[{"name": "region", "type": "VARCHAR"}, {"name": "total", "type": "DOUBLE"}],
        row_count=3,
        csv=b"region,total\neast,3.0\nnorth,17.75\nsouth,20.0\n",
    )
    page = logged_in(browser, asgi_server, user).new_page()

    page.goto(f"{asgi_server.url}/admin/datasets/dataset/{dataset.pk}/change/")
    expect(page.locator("table.dataset-schema")).to_contain_text("order_date")
    look_at_both_widths(page, "s1-dataset", phone_fits=False)

    page.goto(f"{asgi_server.url}/admin/agents/execution/{run.pk}/change/")
    results = page.locator(".dataset-result-of-run")
    expect(results).to_contain_text("north")
    expect(results.get_by_role("link", name="download CSV")).to_have_count(1)
    look_at_both_widths(page, "s1-run-results", phone_fits=False)
