"""Admin detail pages a review found rough (issue 27), in Chromium at 1440 and 390 px
(screenshots u9-*, none scrolling sideways on the phone): an approval's page with its arguments
as rows and its tool by name, and the expected workflow form in words."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from core import tenancy
from core.models import Role
from tests.approvals.inbox_helpers import waiting_approval
from tests.browser.conftest import (
    agency_member,
    logged_in,
    look_at_both_widths,
)
from tests.processes import AsgiServer

pytestmark = pytest.mark.slow


def test_the_admins_approval_page_shows_arguments_as_rows_and_the_tool_by_name(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agency, user = agency_member(Role.ADMIN)
    body = "Hi Sofia,\n\nThanks again for your time.\n\nBest regards"
    with tenancy.agency_context(agency.id):
        approval = waiting_approval(
            agency, arguments={"to": ["sofia@example.com"], "subject": "A quick idea", "body": body}
        )
    page = logged_in(browser, asgi_server, user).new_page()
    page.goto(f"{asgi_server.url}/admin/approvals/approval/{approval.pk}/change/")

    expect(page.locator("h1, nav").filter(has_text="Send Email (pending)").first).to_be_visible()
    rows = page.locator(".inbox-args dt")
    expect(rows).to_have_text(["To (1)", "Subject", "Body"])
    expect(page.locator(".inbox-args pre").first).to_have_text(body)
    expect(page.get_by_role("link", name="Send Email (waiting for approval)")).to_be_visible()
    look_at_both_widths(page, "u9-approval-admin")


def test_the_expected_workflow_form_has_empty_boxes_with_examples_and_help_in_words(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    _, user = agency_member(Role.ADMIN)
    page = logged_in(browser, asgi_server, user).new_page()
    page.goto(f"{asgi_server.url}/admin/flow/expectedworkflow/add/")

    for name in ("expected_states", "expected_actions", "expected_transitions"):
        box = page.locator(f"#id_{name}")
        expect(box).to_have_value("")
        expect(box).to_have_attribute("placeholder", re.compile(r"^e\.g\. \[\{"))
    expect(page.locator("#id_success_conditions")).to_have_value("")
    expect(page.locator("#id_success_conditions")).to_have_attribute(
        "placeholder", 'e.g. {"status": "completed"}'
    )
    expect(page.get_by_text("Seed 003")).to_have_count(0)
    look_at_both_widths(page, "u9-expected-workflow-add")
