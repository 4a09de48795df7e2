"""The admin's page of one approval reads as the inbox does: the proposed arguments as rows (their
names in words, a body's line breaks as line breaks), the approval and its tool call by the tool's
display name and the status as people say it."""

from __future__ import annotations

import pytest
from django.urls import reverse

from approvals.models import Approval
from core.models import Agency, Role
from tests.approvals.inbox_helpers import login, waiting_approval
from tests.factories import AgencyFactory

pytestmark = pytest.mark.django_db

BODY = "Hi Ann,\n\nThanks for your time.\n\nBest regards"


@pytest.fixture
def approval() -> Approval:
    agency: Agency = AgencyFactory.create()
    return waiting_approval(agency, arguments={"to": ["ann@example.com"], "body": BODY})


def test_the_admin_page_shows_the_proposed_arguments_as_rows_with_real_line_breaks(
    approval: Approval,
) -> None:
    client, _ = login(approval.agency, Role.ADMIN)
    page = client.get(reverse("admin:approvals_approval_change", args=[approval.pk]))
    html = page.content.decode()
    assert page.status_code == 200
    assert '<dl class="inbox-args">' in html
    assert "<dt>Body</dt>" in html
    assert "Hi Ann,\n\nThanks for your time." in html  # the text's own line breaks
    assert "\\n" not in html.split("inbox-args", 1)[1].split("</dl>", 1)[0]
    assert "<dt>To" in html
    assert "approvals/inbox.css" in html  # the rows' stylesheet, the inbox's own


def test_the_approval_and_its_tool_call_are_named_by_the_tool_and_the_status_in_words(
    approval: Approval,
) -> None:
    assert str(approval) == "Send Email (pending)"
    assert approval.tool_call is not None
    assert str(approval.tool_call) == "Send Email (waiting for approval)"
    client, _ = login(approval.agency, Role.ADMIN)
    html = client.get(reverse("admin:approvals_approval_change", args=[approval.pk])).content
    page = html.decode()
    assert "Send Email (pending)" in page  # title and breadcrumb
    assert "Send Email (waiting for approval)" in page  # the tool call's link
    assert "Email_send (pending)" not in page
    assert "(waiting_approval)" not in page


def test_a_tool_call_without_its_tool_row_is_named_by_the_tool_name(approval: Approval) -> None:
    call = approval.tool_call
    assert call is not None
    call.tool = None
    assert str(call) == "email_send (waiting for approval)"
