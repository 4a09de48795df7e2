"""The approvers' inbox end to end, as an approver uses it: real runs (a real Celery worker, the
fake provider server), the real ASGI server and Chromium. A risky action appears in the open
inbox without a reload and one Approve runs it once; a deny needs a reason and a confirmation and
cancels the run; an invalid edit is refused at its field and a valid one runs; an answer to a
question resumes the run with it; a tool failing three times asks for help and a hint resumes the
run; and on a 390 px phone the action reads first and Approve is one full-width tap. Screens
along the way are saved under .data/screenshots/ (inbox-flow-*.png) to be looked at."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from agents.models import Agent, Execution, ExecutionStatus, StopReason
from agents.services import execution_create
from approvals.models import Approval, ApprovalStatus, Question, QuestionKind, QuestionStatus
from core import tenancy
from core.models import Role, User
from crm.models import Contact, EmailMessage, Note
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import Reply, by_turn, text_reply, tool_call_reply
from tests.browser.conftest import DESKTOP, PHONE, logged_in, screenshot
from tests.factories import MembershipFactory
from tests.processes import AsgiServer, Worker, wait_for
from tools.models import ToolCall, ToolCallStatus

pytestmark = pytest.mark.slow

APPROVE_NOTES = {"type": "require_approval", "tools": ["crm_add_note"]}
NOTE = "Renewal agreed for two years; send the contract on Monday."
BADGE = '#nav-sidebar-apps a[href="/approvals/"] .sidebar-badge'
LIVE = 20_000  # ms: a run reaching the worker, its step, the socket and the list's refresh
WAITING = {"waiting_approval", "waiting_input"}


# --- set-up --------------------------------------------------------------------------------------


def _approver(agent: Agent) -> User:
    return MembershipFactory.create(agency_id=agent.agency_id, role=Role.APPROVER).user


def _contact(agent: Agent, email: str = "ada@northwind.example") -> Contact:
    with tenancy.agency_context(agent.agency_id):
        return Contact.objects.create(
            agency_id=agent.agency_id, site_id=agent.site_id, first_name="Ada", email=email
        )


def _note_call(contact: Contact | str, content: str = NOTE) -> Reply:
    contact_id = contact if isinstance(contact, str) else str(contact.id)
    return tool_call_reply("crm_add_note", {"contact_id": contact_id, "content": content})


def _start(agent: Agent, text: str = "Note the renewal on Ada's contact.") -> Execution:
    with tenancy.agency_context(agent.agency_id):
        execution = execution_create(agent=agent, input=text)
    assert execution is not None
    return execution


def _waiting(agent: Agent, text: str = "Note the renewal on Ada's contact.") -> Execution:
    execution = wait_for(_start(agent, text), WAITING | {"completed", "failed", "cancelled"})
    assert execution.status in WAITING, (execution.status, execution.error)
    return execution


def _approval(execution: Execution) -> Approval:
    with tenancy.agency_context(execution.agency_id):
        return Approval.objects.select_related("decided_by").get(execution=execution)


def _question(execution: Execution) -> Question:
    with tenancy.agency_context(execution.agency_id):
        return Question.objects.get(execution=execution)


def _calls(execution: Execution) -> list[tuple[str, str]]:
    with tenancy.agency_context(execution.agency_id):
        return list(
            ToolCall.objects.filter(execution=execution)
            .order_by("created_at")
            .values_list("status", "error_code")
        )


def _notes(agent: Agent) -> list[tuple[uuid.UUID, str]]:
    with tenancy.agency_context(agent.agency_id):
        return list(
            Note.objects.filter(agency_id=agent.agency_id).values_list("contact_id", "content")
        )


def _emails(agent: Agent) -> list[EmailMessage]:
    with tenancy.agency_context(agent.agency_id):
        return list(EmailMessage.objects.filter(agency_id=agent.agency_id))


def _status(execution: Execution) -> str:
    with tenancy.agency_context(execution.agency_id):
        execution.refresh_from_db()
    return execution.status


def _no_sideways_scroll(page: Page) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"] + 1, f"{page.url} scrolls sideways ({width} px)"


def _at_both_widths(page: Page, name: str) -> None:
    """The page as it is, photographed at 1440 px and at 390 px (where it must not scroll
    sideways), then back at 1440 px."""
    page.set_viewport_size(DESKTOP)
    screenshot(page, f"{name}-desktop")
    page.set_viewport_size(PHONE)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"{page.url} scrolls sideways at 390 px ({width} px)"
    screenshot(page, f"{name}-phone")
    page.set_viewport_size(DESKTOP)


@pytest.fixture
def approver_session(
    browser: Browser, asgi_server: AsgiServer
) -> Iterator[Callable[..., BrowserContext]]:
    """``open(user, **context_options)``: a browser context logged in as ``user``; closed after
    the test."""
    contexts: list[BrowserContext] = []

    def open_for(user: User, **options: Any) -> BrowserContext:
        context = logged_in(browser, asgi_server, user, **options)
        contexts.append(context)
        return context

    yield open_for
    for context in contexts:
        context.close()


# --- the flows -----------------------------------------------------------------------------------


def test_an_action_started_after_the_inbox_opened_appears_live_and_approve_runs_it_once(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
    asgi_server: AsgiServer,
    approver_session: Callable[..., BrowserContext],
) -> None:
    agent = make_agent(allowed_tools=["crm_*"], constraints=[APPROVE_NOTES], name="Account notes")
    contact = _contact(agent)
    fake_llm_server.set_responder(
        by_turn(_note_call(contact), text_reply("Noted.")), key=agent.llm_model
    )
    approver = _approver(agent)
    context = approver_session(approver)
    page = context.new_page()
    page.goto(f"{asgi_server.url}/approvals/")
    inbox = page.locator("#inbox")
    expect(inbox.locator("[data-live-state]")).to_have_attribute("data-live-state", "open")
    expect(inbox.get_by_text("Nothing waits for a person.")).to_be_visible()
    expect(page.locator(BADGE)).to_have_count(0)
    # A second tab keeps the list open while the first decides: the item must leave it live.
    watcher = context.new_page()
    watcher.goto(f"{asgi_server.url}/approvals/")
    expect(watcher.locator("#inbox [data-live-state]")).to_have_attribute("data-live-state", "open")
    # And any other admin page shows the count and a toast (live/static/live/notifications.js).
    elsewhere = context.new_page()
    elsewhere.goto(f"{asgi_server.url}/admin/?home")
    expect(elsewhere.locator("#staff-home [data-live-state]")).to_have_attribute(
        "data-live-state", "open"
    )
    for tab in (page, watcher, elsewhere):
        tab.evaluate("window.__sameDocument = true")

    execution = _start(agent)

    action = f"Add a note to contact {str(contact.id)[:8]}: '{NOTE}'"
    cards = inbox.locator(".inbox-card")
    expect(cards).to_have_count(1, timeout=LIVE)
    expect(cards.locator(".inbox-card__title")).to_have_text(action)
    expect(cards).to_contain_text("Account notes")
    expect(page.locator("#inbox-waiting-count")).to_have_text("1")
    expect(page.locator(BADGE)).to_have_text("1")
    expect(page.locator(".agentdesk-toast")).to_contain_text(f"Approval needed: {action}")
    screenshot(page, "inbox-flow-live-desktop", full_page=False)
    expect(watcher.locator("#inbox .inbox-card")).to_have_count(1, timeout=LIVE)
    expect(elsewhere.locator(BADGE)).to_have_text("1", timeout=LIVE)
    expect(elsewhere.locator(".agentdesk-toast")).to_contain_text(f"Approval needed: {action}")
    expect(elsewhere.locator(".agentdesk-toast a")).to_have_attribute(
        "href", f"/approvals/{_approval(execution).pk}/"
    )
    for tab in (page, elsewhere):
        assert tab.evaluate("window.__sameDocument") is True  # arrived without a reload
    assert _status(execution) == ExecutionStatus.WAITING_APPROVAL
    assert _notes(agent) == []  # nothing ran before the decision

    cards.locator("a").click()
    expect(page.locator("h1.inbox-action")).to_have_text(action)
    expect(page.locator(".inbox-item")).to_contain_text("Account notes wants to run crm_add_note")
    page.locator('[data-action="approve"]').click()

    page.wait_for_url(f"{asgi_server.url}/approvals/")
    expect(page.get_by_text(f"Approved: {action}.")).to_be_visible()
    expect(inbox.get_by_text("Nothing waits for a person.")).to_be_visible()
    execution = wait_for(execution)
    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert execution.output == "Noted."
    assert _notes(agent) == [(contact.id, NOTE)]  # the side effect, once
    assert _calls(execution) == [(ToolCallStatus.COMPLETED, "")]
    approval = _approval(execution)
    assert approval.status == ApprovalStatus.APPROVED
    assert approval.decided_by_id == approver.pk
    assert approval.edited_arguments is None
    # The other tab: the decided item left its list, and the badge went, without a reload.
    expect(watcher.get_by_text("Nothing waits for a person.")).to_be_visible(timeout=LIVE)
    expect(watcher.locator("#inbox-waiting-count")).to_have_text("0")
    expect(watcher.locator(BADGE)).to_have_count(0)
    expect(elsewhere.locator(BADGE)).to_have_count(0, timeout=LIVE)
    for tab in (watcher, elsewhere):
        assert tab.evaluate("window.__sameDocument") is True


def test_a_deny_needs_a_reason_and_a_confirmation_then_cancels_the_run(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
    asgi_server: AsgiServer,
    approver_session: Callable[..., BrowserContext],
) -> None:
    agent = make_agent(allowed_tools=["crm_*"], constraints=[APPROVE_NOTES])
    contact = _contact(agent)
    fake_llm_server.set_responder(
        by_turn(_note_call(contact), text_reply("Noted.")), key=agent.llm_model
    )
    execution = _waiting(agent)
    approval = _approval(execution)
    reason = "The renewal is not signed yet: no note until legal confirms."
    approver = _approver(agent)
    page = approver_session(approver).new_page()
    page.goto(f"{asgi_server.url}/approvals/{approval.pk}/")

    # An empty reason: refused at the field, nothing decided.
    page.locator('summary[data-action="deny"]').click()
    page.locator(".inbox-deny form button[type=submit]").click()
    field = page.locator('.inbox-field--error[data-field="reason"]')
    expect(field).to_contain_text("Say why the action is denied.")
    assert _approval(execution).status == ApprovalStatus.PENDING
    assert _status(execution) == ExecutionStatus.WAITING_APPROVAL

    page.fill("#deny_reason", reason)
    page.get_by_role("button", name="Deny…").click()
    confirm = page.locator(".inbox-confirm")
    expect(confirm.get_by_text("Deny this action?")).to_be_visible()
    expect(confirm).to_contain_text(reason)
    expect(confirm).to_contain_text("The run is cancelled.")
    assert _approval(execution).status == ApprovalStatus.PENDING  # not before the confirmation
    page.locator('[data-action="confirm-deny"]').click()

    page.wait_for_url(f"{asgi_server.url}/approvals/")
    expect(page.get_by_text("(the run is cancelled).")).to_be_visible()
    approval = _approval(execution)
    assert approval.status == ApprovalStatus.DENIED
    assert approval.decision_reason == reason
    assert approval.decided_by_id == approver.pk
    execution = wait_for(execution)
    assert execution.status == ExecutionStatus.CANCELLED
    assert execution.stop_reason == StopReason.APPROVAL_DENIED
    assert reason in execution.error
    assert _calls(execution) == [(ToolCallStatus.DENIED, "approval_denied")]
    assert _notes(agent) == []  # the action never ran
    assert len(fake_llm_server.requests_for(agent.llm_model)) == 1  # never resumed
    # The item's page now says what came of it.
    page.goto(f"{asgi_server.url}/approvals/{approval.pk}/")
    outcome = page.locator(".inbox-outcome")
    expect(outcome).to_contain_text("Denied by")
    expect(outcome).to_contain_text("The run was cancelled; the action was not run.")
    expect(outcome).to_contain_text(reason)
    expect(page.locator('[data-action="approve"]')).to_have_count(0)


def test_an_invalid_edit_is_refused_at_its_field_and_a_valid_one_runs_as_edited(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
    asgi_server: AsgiServer,
    approver_session: Callable[..., BrowserContext],
) -> None:
    agent = make_agent(allowed_tools=["email_send"])  # dangerous: every send waits for a person
    body = "Hi Ana,\n\n20% off the Team plan until September 30.\n\nSam"
    proposed = {"to": ["ana@northwind.example"], "subject": "Q3 offer", "body": body}
    fake_llm_server.set_responder(
        by_turn(tool_call_reply("email_send", proposed), text_reply("Sent.")),
        key=agent.llm_model,
    )
    execution = _waiting(agent, "Send Ana the Q3 offer.")
    approval = _approval(execution)
    approver = _approver(agent)
    page = approver_session(approver).new_page()
    page.goto(f"{asgi_server.url}/approvals/{approval.pk}/")
    _at_both_widths(page, "inbox-flow-edit-approval")
    page.locator('[data-action="edit"]').click()

    # Prefilled with what the model proposed.
    expect(page.locator("#id_arg-to")).to_have_value("ana@northwind.example")
    expect(page.locator("#id_arg-subject")).to_have_value("Q3 offer")
    expect(page.locator("#id_arg-body")).to_have_value(body)
    _at_both_widths(page, "inbox-flow-edit-form")

    # A recipient that is no address: the form takes any line, the tool's schema refuses it at
    # "Review changes" already (issue 27 item 7), before anything asks to confirm it.
    page.fill("#id_arg-to", "ana@northwind.example\nben at northwind")
    page.get_by_role("button", name="Review changes").click()
    to_field = page.locator('.inbox-field--error[data-field="arg-to"]')
    expect(to_field).to_contain_text("line 2: 'ben at northwind' is not a valid e-mail address")
    expect(page.get_by_text("Approve with these arguments?")).to_have_count(0)
    expect(page.locator('[data-action="confirm-edit"]')).to_have_count(0)
    _at_both_widths(page, "inbox-flow-edit-refused-at-review")
    screenshot(page, "inbox-flow-edit-refused-desktop", full_page=False)
    approval = _approval(execution)
    assert (approval.status, approval.edited_arguments) == (ApprovalStatus.PENDING, None)
    assert _status(execution) == ExecutionStatus.WAITING_APPROVAL
    assert _emails(agent) == []

    page.fill("#id_arg-to", "ben@northwind.example")
    page.fill("#id_arg-subject", "Q3 offer (for Ben)")
    page.get_by_role("button", name="Review changes").click()
    changes = page.locator(".inbox-changes")
    expect(changes).to_contain_text("ben@northwind.example")
    expect(changes).to_contain_text("Q3 offer (for Ben)")
    _at_both_widths(page, "inbox-flow-edit-confirm")
    page.locator('[data-action="confirm-edit"]').click()

    page.wait_for_url(f"{asgi_server.url}/approvals/")
    expect(page.get_by_text("Approved with your changes:")).to_be_visible()
    _at_both_widths(page, "inbox-flow-edit-approved")
    edited = {**proposed, "to": ["ben@northwind.example"], "subject": "Q3 offer (for Ben)"}
    approval = _approval(execution)
    assert approval.status == ApprovalStatus.APPROVED
    assert approval.edited_arguments == edited
    assert approval.decided_by_id == approver.pk
    execution = wait_for(execution)
    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert _calls(execution) == [(ToolCallStatus.COMPLETED, "")]
    [email] = _emails(agent)  # sent once, as edited
    assert email.to == edited["to"]
    assert (email.subject, email.body) == (edited["subject"], edited["body"])
    # The model was told what ran, not what it proposed.
    [result] = fake_llm_server.requests_for(agent.llm_model)[1].tool_results
    assert json.loads(result)["to"] == ["ben@northwind.example"]


def test_an_answer_tapped_in_the_inbox_resumes_the_run_with_it(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
    asgi_server: AsgiServer,
    approver_session: Callable[..., BrowserContext],
) -> None:
    agent = make_agent(allowed_tools=["ask_user"], name="Renewals")
    question_text = "Which plan should the renewal offer be for?"
    ask = {"question": question_text, "options": ["Basic", "Pro"], "allow_other": False}
    fake_llm_server.set_responder(
        by_turn(tool_call_reply("ask_user", ask), text_reply("The Pro offer it is.")),
        key=agent.llm_model,
    )
    approver = _approver(agent)
    page = approver_session(approver).new_page()
    page.goto(f"{asgi_server.url}/approvals/")
    inbox = page.locator("#inbox")
    expect(inbox.locator("[data-live-state]")).to_have_attribute("data-live-state", "open")

    execution = _start(agent, "Prepare the renewal offer.")

    card = inbox.locator('.inbox-card[data-kind="question"]')
    expect(card).to_have_count(1, timeout=LIVE)
    expect(card.locator(".inbox-card__title")).to_have_text(question_text)
    expect(card).to_contain_text("Question")
    expect(page.locator(BADGE)).to_have_text("1")
    assert _status(execution) == ExecutionStatus.WAITING_INPUT
    card.locator("a").click()
    expect(page.locator("h1.inbox-action")).to_have_text(question_text)
    options = page.locator('[data-action="option"]')
    expect(options).to_have_text(["Basic", "Pro"])
    expect(page.locator("#answer_text")).to_have_count(0)  # closed options: no free text
    options.filter(has_text="Pro").click()

    page.wait_for_url(f"{asgi_server.url}/approvals/")
    expect(page.get_by_text("Answer sent: the run goes on.")).to_be_visible()
    execution = wait_for(execution)
    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert execution.output == "The Pro offer it is."
    question = _question(execution)
    assert (question.status, question.user_response) == (QuestionStatus.ANSWERED, "Pro")
    assert question.responded_by_id == approver.pk
    requests = fake_llm_server.requests_for(agent.llm_model)
    assert len(requests) == 2
    # The model's next request carries the answer as the ask_user call's result.
    assert [json.loads(result) for result in requests[1].tool_results] == [{"answer": "Pro"}]
    expect(inbox.get_by_text("Nothing waits for a person.")).to_be_visible()


def test_a_tool_failing_three_times_asks_for_help_and_a_hint_resumes_the_run(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
    asgi_server: AsgiServer,
    approver_session: Callable[..., BrowserContext],
) -> None:
    agent = make_agent(allowed_tools=["crm_*"], name="Account notes")
    contact = _contact(agent)
    missing = str(uuid.uuid4())  # no contact has this id: the handler's not_found, thrice
    fake_llm_server.set_responder(
        by_turn(
            _note_call(missing),
            _note_call(missing),
            _note_call(missing),
            _note_call(contact),
            text_reply("Noted."),
        ),
        key=agent.llm_model,
    )
    execution = _waiting(agent)
    assert execution.status == ExecutionStatus.WAITING_INPUT
    hint = "Search the contact by e-mail first: the id you use does not exist."
    approver = _approver(agent)
    page = approver_session(approver).new_page()
    page.goto(f"{asgi_server.url}/approvals/")

    card = page.locator('#inbox .inbox-card[data-kind="question"]')
    expect(card).to_contain_text("Help needed")
    card.locator("a").click()
    expect(page.locator(".inbox-item")).to_contain_text("crm_add_note failed 3 times")
    expect(page.locator(".inbox-failure")).to_have_count(3)
    expect(page.locator(".inbox-failure").first).to_contain_text("not_found")
    page.fill("#answer_text", hint)
    page.locator('[data-action="retry"]').click()

    page.wait_for_url(f"{asgi_server.url}/approvals/")
    expect(page.get_by_text("Hint sent: the run tries again.")).to_be_visible()
    execution = wait_for(execution)
    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    question = _question(execution)
    assert question.kind == QuestionKind.CORRECTION
    assert (question.status, question.user_response) == (QuestionStatus.ANSWERED, hint)
    requests = fake_llm_server.requests_for(agent.llm_model)
    assert len(requests) == 5
    assert hint in requests[3].last_user_text  # the hint is what the model saw next
    assert _calls(execution) == [(ToolCallStatus.FAILED, "not_found")] * 3 + [
        (ToolCallStatus.COMPLETED, "")
    ]
    assert _notes(agent) == [(contact.id, NOTE)]


def test_on_a_phone_the_action_reads_first_and_one_tap_approves(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
    asgi_server: AsgiServer,
    approver_session: Callable[..., BrowserContext],
) -> None:
    agent = make_agent(allowed_tools=["email_send"], name="Renewals")
    proposed = {
        "to": ["ana@northwind.example", "ben@northwind.example"],
        "subject": "Your renewal: 20% off the Team plan until September 30",
        "body": "Hi,\n\nAs promised on our call, here is the renewal offer.\n\nBest,\nSam",
    }
    fake_llm_server.set_responder(
        by_turn(tool_call_reply("email_send", proposed), text_reply("Sent.")),
        key=agent.llm_model,
    )
    execution = _waiting(agent, "Send the renewal offer to Ana and Ben.")
    action = (
        "Send email 'Your renewal: 20% off the Team plan until September 30' "
        "to ana@northwind.example and ben@northwind.example"
    )
    approver = _approver(agent)
    page = approver_session(approver, has_touch=True, is_mobile=True).new_page()
    page.set_viewport_size(PHONE)

    page.goto(f"{asgi_server.url}/approvals/")
    card = page.locator("#inbox .inbox-card")
    expect(card.locator(".inbox-card__title")).to_have_text(action)
    expect(card.locator(".inbox-card__title")).to_be_in_viewport()
    _no_sideways_scroll(page)
    screenshot(page, "inbox-flow-list-phone", full_page=False)
    card.locator("a").tap()

    heading = page.locator("h1.inbox-action")
    expect(heading).to_have_text(action)
    expect(heading).to_be_in_viewport()
    approve = page.locator('[data-action="approve"]')
    expect(approve).to_be_in_viewport()  # no scrolling to decide
    box = approve.bounding_box()
    assert box is not None
    assert box["width"] >= PHONE["width"] - 80, f"Approve is {box['width']} px wide on a phone"
    assert box["height"] >= 44, "Approve is smaller than a thumb"
    _no_sideways_scroll(page)
    screenshot(page, "inbox-flow-approval-phone", full_page=False)
    screenshot(page, "inbox-flow-approval-phone-full")
    assert _status(execution) == ExecutionStatus.WAITING_APPROVAL

    approve.tap()

    page.wait_for_url(f"{asgi_server.url}/approvals/")
    expect(page.get_by_text(f"Approved: {action}.")).to_be_visible()
    _no_sideways_scroll(page)
    screenshot(page, "inbox-flow-approved-phone", full_page=False)
    execution = wait_for(execution)
    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert _approval(execution).status == ApprovalStatus.APPROVED
    [email] = _emails(agent)
    assert (email.to, email.subject) == (proposed["to"], proposed["subject"])
