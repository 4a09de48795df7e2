"""Admin detail pages a review found rough (issue 27), in Chromium at 1440 and 390 px
(screenshots u9-*, none scrolling sideways on the phone): an approval's page with its arguments
as rows and its tool by name, and the expected workflow form in words."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from core import tenancy
from core.models import Agency, Role, User
from tests.approvals.inbox_helpers import waiting_approval
from tests.browser.conftest import DESKTOP, PHONE, logged_in, screenshot
from tests.factories import AgencyFactory, MembershipFactory
from tests.processes import AsgiServer

pytestmark = pytest.mark.slow
SCREENS = Path("/work/notes/u9-screens")


def _member(role: str) -> tuple[Agency, User]:
    agency = AgencyFactory.create(slug=f"details-{uuid.uuid4().hex[:8]}")
    return agency, MembershipFactory.create(agency=agency, role=role).user


def _look(page: Page, name: str) -> None:
    """Screenshots at both widths (into the notes too); no sideways scroll on a phone."""
    SCREENS.mkdir(parents=True, exist_ok=True)
    for viewport, width_name in ((DESKTOP, "1440"), (PHONE, "390")):
        page.set_viewport_size(viewport)
        if viewport is PHONE:
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= PHONE["width"], f"{name} scrolls sideways on a phone ({width} px)"
        path = screenshot(page, f"u9-{name}-{width_name}")
        (SCREENS / path.name).write_bytes(path.read_bytes())
    page.set_viewport_size(DESKTOP)


def test_the_admins_approval_page_shows_arguments_as_rows_and_the_tool_by_name(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agency, user = _member(Role.ADMIN)
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
    _look(page, "approval-admin")


def test_the_expected_workflow_form_has_empty_boxes_with_examples_and_help_in_words(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    _, user = _member(Role.ADMIN)
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
    _look(page, "expected-workflow-add")
