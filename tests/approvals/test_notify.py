"""The deciders' e-mail: one message to each active admin and approver of the item's agency who
has an address, with an absolute link to the item; nothing once the item is no longer pending.
In-process, through Django's locmem e-mail backend."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from django.core.mail import EmailMessage as Mail
from django.utils import timezone
from pytest_django.fixtures import Settings

from approvals import notify
from approvals.models import Approval, ApprovalStatus, QuestionStatus
from approvals.tasks import notify_deciders
from core import tenancy
from core.models import Agency, Role
from tests.approvals.factories import ApprovalFactory, QuestionFactory
from tests.factories import AgencyFactory, MembershipFactory

pytestmark = pytest.mark.django_db
BASE_URL = "https://desk.example.com"


@pytest.fixture(autouse=True)
def base_url(settings: Settings) -> None:
    settings.AGENTDESK_BASE_URL = BASE_URL + "/"  # a trailing slash makes no double slash


@pytest.fixture
def agency() -> Agency:
    return AgencyFactory.create()


@pytest.fixture
def deciders(agency: Agency) -> list[str]:
    """Members of every kind; only the first two should hear of a waiting item."""

    def member(role: str, **user: Any) -> str:
        return MembershipFactory.create(agency=agency, role=role, **user).user.email

    expected = [
        member(Role.ADMIN, user__email="admin@example.com"),
        member(Role.APPROVER, user__email="approver@example.com"),
    ]
    member(Role.STAFF, user__email="staff@example.com")
    member(Role.VIEWER, user__email="viewer@example.com")
    member(Role.APPROVER, user__email="gone@example.com", user__is_active=False)
    member(Role.APPROVER, user__email="")
    MembershipFactory.create(
        agency=AgencyFactory.create(), role=Role.APPROVER, user__email="elsewhere@example.com"
    )
    return expected


def _approval(agency: Agency, **fields: Any) -> Approval:
    return ApprovalFactory.create(
        tool_call__execution__agent__agency=agency,
        tool_call__execution__agent__name="Renewal agent",
        **fields,
    )


def _recipients(outbox: list[Mail]) -> list[str]:
    return sorted(address for message in outbox for address in message.to)


def test_a_pending_approval_mails_each_active_admin_and_approver_of_its_agency(
    agency: Agency, deciders: list[str], mailoutbox: list[Mail]
) -> None:
    expires = timezone.now() + datetime.timedelta(hours=3)
    approval = _approval(agency, expires_at=expires)

    with tenancy.agency_context(agency.id):
        sent = notify.send_decider_emails("approval", approval)

    assert sent == 2
    assert _recipients(mailoutbox) == sorted(deciders)
    assert all(len(message.to) == 1 for message in mailoutbox)  # nobody sees the others
    message = mailoutbox[0]
    assert message.subject == "[AgentDesk] Approval needed: Send an e-mail to 12 recipients"
    assert "Renewal agent wants to: Send an e-mail to 12 recipients" in message.body
    assert f"Decide here: {BASE_URL}/approvals/{approval.id}/" in message.body
    assert f"Expires: {expires:%Y-%m-%d %H:%M} UTC" in message.body


def test_a_pending_question_mails_its_text_options_and_link(
    agency: Agency, deciders: list[str], mailoutbox: list[Mail]
) -> None:
    question = QuestionFactory.create(tool_call__execution__agent__agency=agency)

    with tenancy.agency_context(agency.id):
        sent = notify.send_decider_emails("question", question)

    assert sent == 2
    assert _recipients(mailoutbox) == sorted(deciders)
    message = mailoutbox[0]
    assert "Which plan should the offer be for?" in message.subject
    assert "Options: Basic, Pro" in message.body
    assert f"{BASE_URL}/approvals/questions/{question.id}/" in message.body


@pytest.mark.parametrize("status", [ApprovalStatus.EXPIRED, ApprovalStatus.CANCELLED])
def test_an_approval_no_longer_pending_mails_nobody(
    agency: Agency, deciders: list[str], mailoutbox: list[Mail], status: str
) -> None:
    approval = _approval(agency, status=status)

    with tenancy.agency_context(agency.id):
        assert notify.send_decider_emails("approval", approval) == 0
    assert mailoutbox == []


def test_an_answered_question_mails_nobody(
    agency: Agency, deciders: list[str], mailoutbox: list[Mail]
) -> None:
    question = QuestionFactory.create(
        tool_call__execution__agent__agency=agency,
        status=QuestionStatus.ANSWERED,
        user_response="Pro",
        response_timestamp=timezone.now(),
    )

    with tenancy.agency_context(agency.id):
        assert notify.send_decider_emails("question", question) == 0
    assert mailoutbox == []


def test_the_notify_deciders_task_mails_the_items_deciders(
    agency: Agency, deciders: list[str], mailoutbox: list[Mail]
) -> None:
    approval = _approval(agency)
    question = QuestionFactory.create(tool_call__execution__agent__agency=agency)

    notify_deciders.apply(args=["approval", str(approval.id)], kwargs={"agency_id": str(agency.id)})
    notify_deciders.apply(args=["question", str(question.id)], kwargs={"agency_id": str(agency.id)})

    assert _recipients(mailoutbox) == sorted(deciders * 2)
    links = [message.body.rsplit(" ", 1)[-1] for message in mailoutbox]
    assert sorted(set(links)) == sorted(
        [f"{BASE_URL}/approvals/{approval.id}/", f"{BASE_URL}/approvals/questions/{question.id}/"]
    )


def test_the_task_under_another_agency_finds_no_item_and_mails_nobody(
    agency: Agency, deciders: list[str], mailoutbox: list[Mail]
) -> None:
    approval = _approval(agency)
    other = AgencyFactory.create()
    MembershipFactory.create(agency=other, role=Role.ADMIN, user__email="other-admin@example.com")

    notify_deciders.apply(args=["approval", str(approval.id)], kwargs={"agency_id": str(other.id)})

    assert mailoutbox == []
    with tenancy.agency_context(agency.id):  # still there, for its own agency's task
        assert Approval.objects.filter(pk=approval.pk).exists()
