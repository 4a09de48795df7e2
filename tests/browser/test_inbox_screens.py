"""The approvers' inbox in Chromium, at 1440 px and at 390 px: the list (with items, live, and
empty), an approval, the deny form and its confirmation, the edit form refused by the tool's
schema, a question and a correction. Each screen is checked for what a phone user needs (no
sideways scrolling, the action first, a full-width Approve) and saved under .data/screenshots/
(inbox-*.png) to be looked at."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import Browser, Page, expect

from agents import lifecycle
from agents.models import ExecutionStatus, StepType
from agents.services import execution_cancel
from approvals.models import Approval, Question, QuestionKind, RiskLevel
from core import realtime, tenancy
from core.models import Agency, Role, User
from tests.agents.factories import AgentFactory, ExecutionFactory, ExecutionStepFactory
from tests.approvals.factories import RiskRuleFactory
from tests.approvals.inbox_helpers import open_question, update, waiting_approval
from tests.browser.conftest import DESKTOP, PHONE, logged_in, screenshot
from tests.factories import AgencyFactory, MembershipFactory
from tests.processes import AsgiServer

pytestmark = pytest.mark.slow

LEADS = [f"{name}@northwind.example" for name in ("ana", "ben", "chloe", "dev", "eli", "fay")]


def seed(agency: Agency) -> dict[str, Any]:
    sdr = AgentFactory.create(agency=agency, name="SDR Agent", deny_may_continue=True)
    cs = AgentFactory.create(agency=agency, site=sdr.site, name="CS Orchestrator")
    rule = RiskRuleFactory.create(
        agency=agency,
        name="Bulk e-mail",
        description="Sending to 5 or more recipients at once.",
        tool_pattern="email_send",
        condition={"argument": "to", "min_items": 5},
        risk_level=RiskLevel.HIGH,
    )
    bulk = waiting_approval(
        agency,
        agent=sdr,
        risk_rule=rule,
        risk_explanation="Risk rule 'Bulk e-mail' matched: 'to' has 6 items (at least 5).",
        arguments={
            "to": LEADS,
            "subject": "Q3 offer: 20% off the Team plan until September 30",
            "body": "Hi there,\n\nAs promised on our call, here is the Q3 offer: 20% off the "
            "Team plan for the first year, if you sign before September 30.\n\nBest,\nSam",
        },
        created_ago=datetime.timedelta(minutes=3),
    )
    steps = [
        (StepType.THINK, "The user wants the Q3 offer sent to the Northwind leads. I will look "
         "them up first, then write one e-mail to all of them.", "", None, None),
        (StepType.ACT, "", "crm_search_contacts", {"query": "Northwind", "status": "lead"},
         {"count": 6, "contacts": [{"email": LEADS[0]}, {"email": LEADS[1]}]}),
        (StepType.THINK, "Six leads found. Drafting the offer e-mail.", "", None, None),
    ]  # fmt: skip
    for number, (kind, text, tool, tool_input, tool_output) in enumerate(steps, start=1):
        ExecutionStepFactory.create(
            execution=bulk.execution,
            step_number=number,
            step_type=kind,
            reasoning=text,
            tool_name=tool,
            tool_input=tool_input,
            tool_output=tool_output,
        )
    update(bulk.execution, input="Send the Q3 offer to every Northwind lead.")
    critical = waiting_approval(
        agency,
        agent=cs,
        risk=RiskLevel.CRITICAL,
        arguments={"to": ["ops@northwind.example"], "subject": "Account closure", "body": "-"},
        created_ago=datetime.timedelta(minutes=40),
    )
    low = waiting_approval(
        agency,
        agent=cs,
        risk=RiskLevel.LOW,
        arguments={"to": ["ana@northwind.example"], "subject": "Thanks!", "body": "-"},
        created_ago=datetime.timedelta(hours=5),
    )
    question = open_question(
        agency,
        agent=sdr,
        question="Priya asked about pricing for 40 seats. Which plan should the quote be for?",
        options=["Team (monthly)", "Team (yearly)", "Enterprise"],
        allow_other=True,
        created_ago=datetime.timedelta(minutes=12),
    )
    correction = open_question(
        agency,
        agent=cs,
        kind=QuestionKind.CORRECTION,
        question="The tool crm_get_contact failed 3 times in this run; last error: 'priya@' is "
        "not a 'email'. Retry with a hint, or stop the run?",
        allow_other=True,
        context={
            "tool": "crm_get_contact",
            "failures": [
                {
                    "arguments": {"email": value},
                    "error_code": "invalid_arguments",
                    "error": f"$.email: {value!r} is not a 'email'",
                    "at": (timezone.now() - datetime.timedelta(minutes=m)).isoformat(),
                }
                for value, m in (("priya", 3), ("priya@", 2), ("priya@", 1))
            ],
        },
        created_ago=datetime.timedelta(minutes=1),
    )
    return {
        "bulk": bulk,
        "critical": critical,
        "low": low,
        "question": question,
        "correction": correction,
    }


def no_sideways_scroll(page: Page) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    viewport = page.viewport_size
    assert viewport is not None
    assert width <= viewport["width"] + 1, f"{page.url} scrolls sideways ({width} px)"


def both_widths(page: Page, url: str, name: str) -> None:
    """Load ``url`` at 1440 px and at 390 px, checked and photographed at each."""
    for size, suffix in ((DESKTOP, "desktop"), (PHONE, "phone")):
        page.set_viewport_size(size)
        page.goto(url)
        no_sideways_scroll(page)
        screenshot(page, f"inbox-{name}-{suffix}")


def approver_of(agency: Agency) -> User:
    return MembershipFactory.create(agency=agency, role=Role.APPROVER).user


def test_inbox_screens_at_desktop_and_phone_widths(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agency = AgencyFactory.create(name="Northwind Sales")
    items = seed(agency)
    page = logged_in(browser, asgi_server, approver_of(agency)).new_page()
    base = asgi_server.url

    # The list: riskiest first, the action in words leading each card.
    both_widths(page, f"{base}/approvals/", "list")
    cards = page.locator(".inbox-card")
    expect(cards).to_have_count(5)
    expect(cards.first).to_contain_text("Account closure")  # critical first
    bulk: Approval = items["bulk"]
    title = page.locator(f'[data-id="{bulk.pk}"] .inbox-card__link > *').first
    expect(title).to_have_text(
        "Send email 'Q3 offer: 20% off the Team plan until September 30' to 6 recipients"
    )
    page.set_viewport_size(DESKTOP)

    # The approval: at 390 px Approve is one full-width tap.
    both_widths(page, f"{base}/approvals/{bulk.pk}/", "approval")
    approve = page.locator('[data-action="approve"]')
    box = approve.bounding_box()
    assert box is not None
    assert box["width"] >= PHONE["width"] - 80, "Approve is not full-width on a phone"
    assert box["height"] >= 44, "Approve is smaller than a thumb"

    # Deny: the reason, the choice the agent allows, then a confirmation.
    for size, suffix in ((DESKTOP, "desktop"), (PHONE, "phone")):
        page.set_viewport_size(size)
        page.goto(f"{base}/approvals/{bulk.pk}/")
        page.locator('summary[data-action="deny"]').click()
        expect(page.get_by_text("Tell the agent no and let it continue")).to_be_visible()
        no_sideways_scroll(page)
        screenshot(page, f"inbox-deny-form-{suffix}")
    page.fill("#deny_reason", "Six leads at once is too many; send to Ana first.")
    page.locator(".inbox-deny form button[type=submit]").click()
    expect(page.get_by_text("Deny this action?")).to_be_visible()
    no_sideways_scroll(page)
    screenshot(page, "inbox-deny-confirm-phone")

    # Edit and approve: a valid edit is confirmed on a second page; the tool's schema refuses an
    # address at "Review changes" already, at the field.
    for size, suffix in ((DESKTOP, "desktop"), (PHONE, "phone")):
        page.set_viewport_size(size)
        page.goto(f"{base}/approvals/{bulk.pk}/edit/")
        page.fill("#id_arg-subject", "Q3 offer: 20% off the Team plan (for Ana)")
        page.get_by_role("button", name="Review changes").click()
        expect(page.get_by_text("Approve with these arguments?")).to_be_visible()
        no_sideways_scroll(page)
        screenshot(page, f"inbox-edit-confirm-{suffix}")
        page.goto(f"{base}/approvals/{bulk.pk}/edit/")
        page.fill("#id_arg-to", "ana@northwind.example\nben at northwind")
        page.get_by_role("button", name="Review changes").click()
        expect(page.locator(".inbox-field--error")).to_contain_text("is not a valid e-mail address")
        expect(page.get_by_text("Approve with these arguments?")).to_have_count(0)
        no_sideways_scroll(page)
        screenshot(page, f"inbox-edit-error-{suffix}")
    with tenancy.platform_context():
        assert Approval.objects.get(pk=bulk.pk).status == "pending"

    # A question and a correction.
    question: Question = items["question"]
    both_widths(page, f"{base}/approvals/questions/{question.pk}/", "question")
    expect(page.get_by_role("button", name="Team (yearly)")).to_be_visible()
    correction: Question = items["correction"]
    both_widths(page, f"{base}/approvals/questions/{correction.pk}/", "correction")
    expect(page.locator('[data-action="retry"]')).to_be_visible()


def test_the_list_updates_live_and_an_empty_inbox_says_why(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agency = AgencyFactory.create(name="Quiet Agency")
    approval = waiting_approval(
        agency,
        agent=AgentFactory.create(agency=agency, name="Follow-up agent"),
        arguments={"to": ["ana@example.com"], "subject": "Following up", "body": "-"},
    )
    page = logged_in(browser, asgi_server, approver_of(agency)).new_page()
    page.goto(f"{asgi_server.url}/approvals/")
    inbox = page.locator("#inbox")
    expect(inbox.locator("[data-live-state]")).to_have_attribute("data-live-state", "open")
    expect(inbox.locator(".inbox-card")).to_have_count(1)
    expect(page.locator('#nav-sidebar-apps a[href="/approvals/"] .sidebar-badge')).to_have_text("1")
    page.evaluate("window.__sameDocument = true")

    # The run is cancelled elsewhere: its approval leaves the list, without a reload.
    with tenancy.agency_context(agency.pk):
        execution_cancel(execution=approval.execution, reason="Handled by phone.")
    realtime.flush()

    expect(inbox.get_by_text("Nothing waits for a person.")).to_be_visible(timeout=10_000)
    expect(page.locator("#inbox-waiting-count")).to_have_text("0")
    expect(page.locator('#nav-sidebar-apps a[href="/approvals/"] .sidebar-badge')).to_have_count(0)
    assert page.evaluate("window.__sameDocument") is True
    both_widths(page, f"{asgi_server.url}/approvals/", "empty")

    # A new item arrives: a run parks for an approval.
    execution = ExecutionFactory.create(agent=approval.agent, status=ExecutionStatus.RUNNING)
    page.goto(f"{asgi_server.url}/approvals/")
    expect(inbox.locator("[data-live-state]")).to_have_attribute("data-live-state", "open")
    newcomer = waiting_approval(
        agency,
        agent=approval.agent,
        arguments={"to": ["ben@example.com"], "subject": "New one", "body": "-"},
    )
    with tenancy.agency_context(agency.pk):
        # Park a run the way the runtime does (a status change is what the page listens for).
        locked = type(execution).objects.select_for_update().get(pk=execution.pk)
        lifecycle.record_transition(
            locked, ExecutionStatus.WAITING_APPROVAL, reason="approval needed"
        )
        locked.save(update_fields=["status", "sequence", "updated_at"])
    realtime.flush()
    expect(inbox.get_by_text("Send email 'New one' to ben@example.com")).to_be_visible(
        timeout=10_000
    )
    assert newcomer.pk
