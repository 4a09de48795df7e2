"""Deciding in the inbox: approve in one tap; deny with a required reason and a confirmation;
edit the arguments (re-validated by the service) and approve; a decision taken elsewhere shows
as such; answers, hints and stops for questions. Every POST checks the role."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.test import Client

from agents.models import Execution, ExecutionStatus, StopReason
from approvals.models import Approval, ApprovalStatus, Question, QuestionKind, QuestionStatus
from approvals.questions import question_answer
from approvals.services import approval_decide
from core import tenancy
from core.models import Agency, Role
from tests.agents.factories import AgentFactory
from tests.approvals.inbox_helpers import (
    EMAIL_ARGS,
    fetch,
    login,
    open_question,
    waiting_approval,
)
from tests.factories import AgencyFactory

pytestmark = pytest.mark.django_db

INBOX = "/approvals/"


@pytest.fixture
def agency() -> Agency:
    return AgencyFactory.create()


def messages_of(response: Any) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


def body(response: Any) -> str:
    return response.content.decode()


def edit_data(**overrides: Any) -> dict[str, Any]:
    data = {"arg-to": "ann@example.com", "arg-subject": "Q3 offer", "arg-body": "Hello Ann"}
    data.update({f"arg-{key}": value for key, value in overrides.items()})
    return data


# --- approve -----------------------------------------------------------------------------------


def test_approve_in_one_tap_resumes_the_run(agency: Agency) -> None:
    approval = waiting_approval(agency)
    client, user = login(agency, Role.APPROVER)

    response = client.post(f"{INBOX}{approval.pk}/approve/")

    assert (response.status_code, response["Location"]) == (302, INBOX)
    decided = fetch(Approval, approval.pk)
    assert (decided.status, decided.decided_by_id) == (ApprovalStatus.APPROVED, user.pk)
    assert decided.edited_arguments is None
    assert fetch(Execution, approval.execution_id).status == ExecutionStatus.PENDING
    assert messages_of(response) == ["Approved: Send email 'Q3 offer' to ann@example.com."]


def test_a_second_approve_shows_who_decided_first_instead_of_an_error(agency: Agency) -> None:
    approval = waiting_approval(agency)
    first, first_user = login(agency, Role.ADMIN)
    second, _ = login(agency, Role.APPROVER)
    assert first.post(f"{INBOX}{approval.pk}/approve/").status_code == 302

    response = second.post(f"{INBOX}{approval.pk}/approve/")

    assert response.status_code == 409
    page = body(response)
    assert f"Already decided: Approved by {first_user} at" in page
    assert "Your decision was not applied." in page
    assert "Traceback" not in page
    assert fetch(Approval, approval.pk).decided_by_id == first_user.pk


def test_a_decision_taken_over_the_api_meanwhile_is_shown_on_every_form(agency: Agency) -> None:
    approval = waiting_approval(agency)
    client, _ = login(agency, Role.APPROVER)
    _, elsewhere = login(agency, Role.APPROVER)
    with tenancy.agency_context(agency.pk):
        approval_decide(approval=approval, approve=False, user_id=elsewhere.pk, reason="No.")

    for url, data in (
        (f"{INBOX}{approval.pk}/approve/", {}),
        (f"{INBOX}{approval.pk}/deny/", {"reason": "Too late", "confirmed": "1"}),
        (f"{INBOX}{approval.pk}/edit/", {**edit_data(), "confirmed": "1"}),
    ):
        response = client.post(url, data)
        assert response.status_code == 409, url
        assert f"Already decided: Denied by {elsewhere}" in body(response), url
    assert client.get(f"{INBOX}{approval.pk}/deny/")["Location"] == f"{INBOX}{approval.pk}/"


@pytest.mark.parametrize("role", [Role.STAFF, Role.VIEWER])
def test_staff_and_viewers_cannot_decide(agency: Agency, role: str) -> None:
    approval = waiting_approval(agency)
    question = open_question(agency, options=["Pro"])
    client, _ = login(agency, role)

    for url, data in (
        (f"{INBOX}{approval.pk}/approve/", {}),
        (f"{INBOX}{approval.pk}/deny/", {"reason": "No", "confirmed": "1"}),
        (f"{INBOX}{approval.pk}/edit/", {**edit_data(), "confirmed": "1"}),
        (f"{INBOX}questions/{question.pk}/answer/", {"answer": "Pro"}),
        (f"{INBOX}questions/{question.pk}/answer/", {"action": "stop", "confirmed": "1"}),
    ):
        assert client.post(url, data).status_code == 403, url
    assert client.get(f"{INBOX}{approval.pk}/edit/").status_code == 403
    assert fetch(Approval, approval.pk).status == ApprovalStatus.PENDING
    assert fetch(Question, question.pk).status == QuestionStatus.PENDING


def test_a_post_needs_the_csrf_token(agency: Agency) -> None:
    approval = waiting_approval(agency)
    _, user = login(agency, Role.APPROVER)
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.post(f"{INBOX}{approval.pk}/approve/").status_code == 403
    assert fetch(Approval, approval.pk).status == ApprovalStatus.PENDING


def test_approve_is_post_only(agency: Agency) -> None:
    approval = waiting_approval(agency)
    client, _ = login(agency, Role.APPROVER)
    assert client.get(f"{INBOX}{approval.pk}/approve/").status_code == 405


# --- deny ---------------------------------------------------------------------------------------


def test_deny_without_a_reason_is_refused_and_decides_nothing(agency: Agency) -> None:
    approval = waiting_approval(agency)
    client, _ = login(agency, Role.APPROVER)

    response = client.post(f"{INBOX}{approval.pk}/deny/", {"reason": "  ", "confirmed": "1"})

    assert response.status_code == 400
    assert "Say why the action is denied." in body(response)
    assert fetch(Approval, approval.pk).status == ApprovalStatus.PENDING


def test_deny_asks_for_confirmation_then_cancels_the_run(agency: Agency) -> None:
    approval = waiting_approval(agency)
    client, user = login(agency, Role.APPROVER)
    url = f"{INBOX}{approval.pk}/deny/"

    confirm = client.post(url, {"reason": "Wrong customer"})
    assert confirm.status_code == 200
    page = body(confirm)
    assert "Deny this action?" in page
    assert "Wrong customer" in page
    assert "The run is cancelled." in page
    assert 'name="reason" value="Wrong customer"' in page
    assert 'name="then"' not in page  # the agent's runs always end on a deny
    assert fetch(Approval, approval.pk).status == ApprovalStatus.PENDING

    response = client.post(url, {"reason": "Wrong customer", "confirmed": "1"})

    assert (response.status_code, response["Location"]) == (302, INBOX)
    denied = fetch(Approval, approval.pk)
    assert (denied.status, denied.decision_reason, denied.decided_by_id) == (
        ApprovalStatus.DENIED,
        "Wrong customer",
        user.pk,
    )
    run = fetch(Execution, approval.execution_id)
    assert (run.status, run.stop_reason) == (ExecutionStatus.CANCELLED, StopReason.APPROVAL_DENIED)
    assert "(the run is cancelled)" in messages_of(response)[0]


def test_the_confirmation_can_go_back_to_change_the_reason(agency: Agency) -> None:
    approval = waiting_approval(agency)
    client, _ = login(agency, Role.APPROVER)
    back = client.post(f"{INBOX}{approval.pk}/deny/", {"reason": "Draft reason", "back": "1"})
    assert back.status_code == 200
    assert "Draft reason</textarea>" in body(back)
    assert fetch(Approval, approval.pk).status == ApprovalStatus.PENDING


def test_deny_may_let_the_run_continue_where_the_agent_allows_it(agency: Agency) -> None:
    agent = AgentFactory.create(agency=agency, deny_may_continue=True)
    approval = waiting_approval(agency, agent=agent)
    client, _ = login(agency, Role.ADMIN)
    url = f"{INBOX}{approval.pk}/deny/"
    assert "Tell the agent no and let it continue" in body(client.get(url))

    confirm = client.post(url, {"reason": "Not this one", "then": "continue"})
    assert "The agent is told no and its run continues." in body(confirm)
    response = client.post(url, {"reason": "Not this one", "then": "continue", "confirmed": "1"})

    assert response.status_code == 302
    assert fetch(Approval, approval.pk).status == ApprovalStatus.DENIED
    assert fetch(Execution, approval.execution_id).status == ExecutionStatus.PENDING
    assert "(its run goes on)" in messages_of(response)[0]


def test_a_continue_choice_is_ignored_where_the_agent_does_not_allow_it(agency: Agency) -> None:
    approval = waiting_approval(agency)
    client, _ = login(agency, Role.ADMIN)
    response = client.post(
        f"{INBOX}{approval.pk}/deny/", {"reason": "No", "then": "continue", "confirmed": "1"}
    )
    assert response.status_code == 302
    assert fetch(Execution, approval.execution_id).status == ExecutionStatus.CANCELLED


# --- edit and approve ----------------------------------------------------------------------------


def test_the_edit_form_is_generated_from_the_tools_schema_and_prefilled(agency: Agency) -> None:
    approval = waiting_approval(agency)
    client, _ = login(agency, Role.APPROVER)
    page = body(client.get(f"{INBOX}{approval.pk}/edit/"))
    assert 'name="arg-to"' in page
    assert "ann@example.com</textarea>" in page
    assert 'name="arg-subject"' in page
    assert 'value="Q3 offer"' in page
    assert 'maxlength="120"' in page
    assert 'name="arg-body"' in page
    assert "Hello Ann</textarea>" in page


def test_edit_with_invalid_then_valid_arguments(agency: Agency) -> None:
    approval = waiting_approval(agency)
    client, user = login(agency, Role.APPROVER)
    url = f"{INBOX}{approval.pk}/edit/"

    # The form refuses what it can tell (a required field left empty)...
    empty = client.post(url, edit_data(subject=""))
    assert empty.status_code == 400
    assert "This field is required." in body(empty)

    # ...and the tool's own validator what it cannot (an address that is not one), at the
    # field, at "Review changes" already (no confirmation asked for), and again if a
    # confirmation is sent anyway (the decision's own check, the same code): nothing is decided.
    invalid = edit_data(to="ann@example.com\nnot-an-address")
    for refused in (client.post(url, invalid), client.post(url, {**invalid, "confirmed": 1})):
        assert refused.status_code == 400
        page = body(refused)
        assert "Approve with these arguments?" not in page
        assert "line 2: &#x27;not-an-address&#x27; is not a valid e-mail address" in page
        assert 'data-field="arg-to"' in page.split("inbox-field--error")[1][:200]
    assert fetch(Approval, approval.pk).status == ApprovalStatus.PENDING

    fixed = edit_data(to="ann@example.com\nbob@example.com", subject="Q3 offer, revised")
    confirm = client.post(url, fixed)
    assert "Q3 offer, revised" in body(confirm)
    assert "bob@example.com" in body(confirm)
    response = client.post(url, {**fixed, "confirmed": "1"})

    assert (response.status_code, response["Location"]) == (302, INBOX)
    decided = fetch(Approval, approval.pk)
    assert decided.status == ApprovalStatus.APPROVED
    assert decided.decided_by_id == user.pk
    assert decided.edited_arguments == {
        "to": ["ann@example.com", "bob@example.com"],
        "subject": "Q3 offer, revised",
        "body": "Hello Ann",
    }
    assert fetch(Execution, approval.execution_id).status == ExecutionStatus.PENDING


def test_the_edit_confirmation_shows_only_what_changed(agency: Agency) -> None:
    approval = waiting_approval(agency)
    client, _ = login(agency, Role.APPROVER)
    page = body(client.post(f"{INBOX}{approval.pk}/edit/", edit_data(subject="New subject")))
    changes = page.split('class="inbox-changes"')[1].split("</dl>")[0]
    assert "Subject" in changes
    assert "New subject" in changes
    assert "Q3 offer" in changes
    assert "Body" not in changes


def labels_of(page: str) -> list[str]:
    """What a person reads for each argument: the form's labels and the rows' names."""
    found = re.findall(r"<(?:label|dt)\b[^>]*>\s*([^<]*?)\s*(?:<|$)", page)
    return [html.unescape(label) for label in found if label]


def test_an_approver_reads_argument_names_in_words_on_every_page(agency: Agency) -> None:
    # template_id: a property the tool's schema leaves untitled (as email_send does).
    approval = waiting_approval(agency, arguments={**EMAIL_ARGS, "template_id": "welcome"})
    client, _ = login(agency, Role.APPROVER)
    url = f"{INBOX}{approval.pk}/edit/"
    pages = {
        "approval": body(client.get(f"{INBOX}{approval.pk}/")),
        "edit": body(client.get(url)),
        "review": body(client.post(url, edit_data(template_id="follow-up"))),
    }
    for name, page in pages.items():
        labels = labels_of(page)
        assert "Template ID" in labels, (name, labels)
        assert [label for label in labels if label in ("template_id", "to", "subject")] == [], name
    changes = pages["review"].split('class="inbox-changes"')[1].split("</dl>")[0]
    assert labels_of(changes) == ["Template ID"]


# --- questions ---------------------------------------------------------------------------------


def test_an_option_is_one_tap_and_resumes_the_run(agency: Agency) -> None:
    question = open_question(agency, options=["Pro", "Team"], allow_other=False)
    client, user = login(agency, Role.APPROVER)

    response = client.post(f"{INBOX}questions/{question.pk}/answer/", {"answer": "Team"})

    assert (response.status_code, response["Location"]) == (302, INBOX)
    answered = fetch(Question, question.pk)
    assert (answered.status, answered.user_response, answered.responded_by_id) == (
        QuestionStatus.ANSWERED,
        "Team",
        user.pk,
    )
    assert fetch(Execution, question.execution_id).status == ExecutionStatus.PENDING
    assert messages_of(response) == ["Answer sent: the run goes on."]


def test_a_free_answer_outside_the_options_is_refused_when_not_allowed(agency: Agency) -> None:
    question = open_question(agency, options=["Pro", "Team"], allow_other=False)
    client, _ = login(agency, Role.APPROVER)

    response = client.post(f"{INBOX}questions/{question.pk}/answer/", {"answer": "Enterprise"})

    assert response.status_code == 400
    assert "Pick one of the options: Pro, Team." in body(response)
    assert fetch(Question, question.pk).status == QuestionStatus.PENDING


def test_a_typed_answer_is_required_and_sent(agency: Agency) -> None:
    question = open_question(agency)
    client, _ = login(agency, Role.ADMIN)
    url = f"{INBOX}questions/{question.pk}/answer/"

    empty = client.post(url, {"text": "   "})
    assert empty.status_code == 400
    assert "Write an answer." in body(empty)

    assert client.post(url, {"text": "The Team plan, billed yearly."}).status_code == 302
    assert fetch(Question, question.pk).user_response == "The Team plan, billed yearly."


def correction(agency: Agency) -> Question:
    return open_question(
        agency,
        kind=QuestionKind.CORRECTION,
        question="The tool crm_get_contact failed 3 times in this run.",
        context={
            "tool": "crm_get_contact",
            "failures": [{"arguments": {"email": "x@"}, "error_code": "invalid", "error": "bad"}],
        },
    )


def test_a_correction_retries_with_a_hint(agency: Agency) -> None:
    question = correction(agency)
    client, _ = login(agency, Role.APPROVER)
    url = f"{INBOX}questions/{question.pk}/answer/"

    assert client.post(url, {"action": "retry", "text": ""}).status_code == 400
    response = client.post(url, {"action": "retry", "text": "Use her e-mail address."})

    assert response.status_code == 302
    answered = fetch(Question, question.pk)
    assert (answered.status, answered.user_response) == (
        QuestionStatus.ANSWERED,
        "Use her e-mail address.",
    )
    assert fetch(Execution, question.execution_id).status == ExecutionStatus.PENDING
    assert messages_of(response) == ["Hint sent: the run tries again."]


def test_stopping_a_run_asks_for_confirmation_first(agency: Agency) -> None:
    question = correction(agency)
    client, _ = login(agency, Role.APPROVER)
    url = f"{INBOX}questions/{question.pk}/answer/"

    confirm = client.post(url, {"action": "stop"})
    assert confirm.status_code == 200
    assert "Stop the run?" in body(confirm)
    assert fetch(Question, question.pk).status == QuestionStatus.PENDING

    response = client.post(url, {"action": "stop", "confirmed": "1"})

    assert response.status_code == 302
    assert fetch(Question, question.pk).status == QuestionStatus.SKIPPED
    run = fetch(Execution, question.execution_id)
    assert (run.status, run.stop_reason) == (ExecutionStatus.FAILED, StopReason.TOOL_FAILURES)


def test_a_question_answered_elsewhere_shows_as_such(agency: Agency) -> None:
    question = open_question(agency, options=["Pro", "Team"])
    client, _ = login(agency, Role.APPROVER)
    _, elsewhere = login(agency, Role.ADMIN)
    with tenancy.agency_context(agency.pk):
        question_answer(question=question, answer="Pro", user_id=elsewhere.pk)

    response = client.post(f"{INBOX}questions/{question.pk}/answer/", {"answer": "Team"})

    assert response.status_code == 409
    assert f"Already settled: Answered by {elsewhere}" in body(response)
    assert fetch(Question, question.pk).user_response == "Pro"
