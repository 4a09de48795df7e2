"""The approvers' inbox pages (/approvals/): what waits in my agency only, riskiest first; one
item with what led to it; who sees buttons; another agency's item is a 404; where approvers land."""

from __future__ import annotations

import datetime

import pytest
from django.test import Client
from django.urls import reverse

from agents.models import StepType
from approvals.models import Approval, ApprovalStatus, QuestionKind, QuestionStatus, RiskLevel
from core.models import Agency, Role, User
from tests.agents.factories import AgentFactory, ExecutionStepFactory
from tests.approvals.factories import RiskRuleFactory
from tests.approvals.inbox_helpers import fetch, login, open_question, update, waiting_approval
from tests.factories import AgencyFactory

pytestmark = pytest.mark.django_db

INBOX = "/approvals/"
MINUTE = datetime.timedelta(minutes=1)


@pytest.fixture
def agency() -> Agency:
    return AgencyFactory.create(name="Mine")


@pytest.fixture
def other() -> Agency:
    return AgencyFactory.create(name="Theirs")


def text(client: Client, url: str, status: int = 200) -> str:
    response = client.get(url)
    assert response.status_code == status, response
    return response.content.decode()


def card_order(page: str, needles: list[str]) -> list[str]:
    return sorted(needles, key=page.index)


# --- the list ------------------------------------------------------------------------------


def test_the_inbox_lists_only_my_agencys_waiting_items(agency: Agency, other: Agency) -> None:
    mine = waiting_approval(agency, arguments={"to": ["ann@example.com"], "subject": "Mine"})
    question = open_question(agency, question="Which plan, Pro or Team?")
    waiting_approval(other, arguments={"to": ["x@example.com"], "subject": "Theirs"})
    open_question(other, question="A question of theirs")
    decided = waiting_approval(agency, arguments={"to": ["z@example.com"], "subject": "Old"})
    update(decided, status=ApprovalStatus.EXPIRED)
    client, _ = login(agency, Role.APPROVER)

    page = text(client, INBOX)

    assert "Send email &#x27;Mine&#x27; to ann@example.com" in page
    assert f'href="{INBOX}{mine.pk}/"' in page
    assert "Which plan, Pro or Team?" in page
    assert f'href="{INBOX}questions/{question.pk}/"' in page
    assert "x@example.com" not in page
    assert "A question of theirs" not in page
    assert "Old" not in page
    assert 'id="inbox-waiting-count">2<' in page
    assert "expires in 23 h" in page


def test_items_come_riskiest_first_questions_as_high_and_newest_first_within(
    agency: Agency,
) -> None:
    def approval(subject: str, risk: str, minutes: int) -> None:
        waiting_approval(
            agency,
            risk=risk,
            arguments={"to": ["a@example.com"], "subject": subject, "body": "-"},
            created_ago=minutes * MINUTE,
        )

    approval("low-new", RiskLevel.LOW, 1)
    approval("critical-old", RiskLevel.CRITICAL, 50)
    approval("high-old", RiskLevel.HIGH, 40)
    approval("medium-new", RiskLevel.MEDIUM, 2)
    open_question(agency, question="question-middle", created_ago=20 * MINUTE)
    approval("high-new", RiskLevel.HIGH, 3)
    approval("critical-new", RiskLevel.CRITICAL, 5)
    client, _ = login(agency, Role.VIEWER)

    page = text(client, INBOX)

    expected = [
        "critical-new", "critical-old", "high-new", "question-middle", "high-old", "medium-new",
        "low-new",
    ]  # fmt: skip
    assert card_order(page, expected) == expected
    assert "3 min ago" in page
    assert "50 min ago" in page


def test_an_empty_inbox_says_what_will_appear_there(agency: Agency) -> None:
    client, _ = login(agency, Role.APPROVER)
    page = text(client, INBOX)
    assert "Nothing waits for a person." in page
    assert "proposes a risky action" in page
    assert 'id="inbox-waiting-count">0<' in page


def test_decided_recently_lists_settled_items_with_who_and_why(agency: Agency) -> None:
    client, user = login(agency, Role.APPROVER)
    denied = waiting_approval(agency, arguments={"subject": "Denied one", "to": ["a@x.io"]})
    update(
        denied,
        status=ApprovalStatus.DENIED,
        decided_by=user,
        decided_at=denied.created_at,
        decision_reason="Wrong customer",
    )
    answered = open_question(agency, question="Answered one")
    update(
        answered,
        status=QuestionStatus.ANSWERED,
        user_response="Pro",
        responded_by=user,
        response_timestamp=answered.created_at,
    )
    waiting_approval(agency, arguments={"subject": "Still waiting", "to": ["a@x.io"]})

    page = text(client, f"{INBOX}?show=decided")

    assert "Denied one" in page
    assert "Wrong customer" in page
    assert f"by {user}" in page
    assert "Answered one" in page
    assert "Pro" in page
    assert "Still waiting" not in page
    assert 'aria-current="page">Decided recently' in page


def test_the_list_fragment_carries_the_waiting_count_for_the_badge(agency: Agency) -> None:
    waiting_approval(agency)
    open_question(agency)
    client, _ = login(agency, Role.STAFF)

    response = client.get(reverse("approvals_inbox:list-partial") + "?show=waiting")

    assert response.status_code == 200
    assert response["X-Inbox-List"] == "2"
    body = response.content.decode()
    assert "<html" not in body
    assert 'hx-swap-oob="true">2<' in body


def test_the_list_updates_live_from_the_agency_socket(agency: Agency) -> None:
    client, _ = login(agency, Role.APPROVER)
    page = text(client, INBOX)
    assert 'data-live-socket="/ws/agency/"' in page
    assert 'hx-get="/approvals/partials/list/?show=waiting"' in page
    assert "inbox-update from:body" in page
    assert "approvals/inbox.js" in page
    assert "approvals/inbox.css" in page
    assert "unfold/js/htmx/htmx.js" in page  # in the admin's frame, with its htmx


def test_the_sidebar_has_the_inbox_with_its_count_for_every_member(agency: Agency) -> None:
    waiting_approval(agency)
    for role in Role.values:
        client, _ = login(agency, role)
        page = text(client, INBOX)
        start = page.index('href="/approvals/"')
        link = page[start : page.index("</a>", start)]
        assert "Inbox" in link, role
        assert "sidebar-badge" in link, role
        assert ">\n    1\n</span>" in link, role


def test_a_superuser_picks_the_agency_and_its_fragments_name_it(
    agency: Agency, other: Agency, django_user_model: type[User]
) -> None:
    waiting_approval(other, arguments={"subject": "Of the other", "to": ["a@x.io"]})
    root = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(root)

    assert "choose whose inbox" in text(client, INBOX)
    page = text(client, f"{INBOX}?agency={other.pk}")
    assert "Of the other" in page
    assert f"/approvals/partials/list/?show=waiting&amp;agency={other.pk}" in page
    assert f'data-live-socket="/ws/agency/?agency={other.pk}"' in page


def test_a_login_without_an_agency_sees_an_explanation(django_user_model: type[User]) -> None:
    user = django_user_model.objects.create_user("loner", password="pw", is_staff=True)
    client = Client()
    client.force_login(user)
    assert "does not belong to an active agency" in text(client, INBOX)


def test_the_inbox_is_behind_the_admin_login() -> None:
    response = Client().get(INBOX)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


# --- one approval ------------------------------------------------------------------------------


def test_an_approval_page_shows_the_call_why_and_what_led_to_it(agency: Agency) -> None:
    agent = AgentFactory.create(agency=agency, name="SDR Agent")
    rule = RiskRuleFactory.create(
        agency=agency,
        name="Outreach e-mails",
        description="Every outreach e-mail",
        tool_pattern="custom_*",
        condition={"argument": "to", "min_items": 1},
    )
    approval = waiting_approval(
        agency,
        agent=agent,
        risk_rule=rule,
        risk_explanation="Risk rule 'Outreach e-mails' matched",
        arguments={"to": ["ann@example.com", "bob@example.com"], "subject": "Q3", "body": "Hi"},
    )
    ExecutionStepFactory.create(
        execution=approval.execution,
        step_number=1,
        step_type=StepType.THINK,
        reasoning="Priya asked about pricing; I will write to her.",
    )
    ExecutionStepFactory.create(
        execution=approval.execution,
        step_number=2,
        step_type=StepType.ACT,
        tool_name="crm_search_contacts",
        tool_input={"query": "Priya"},
        tool_output={"contacts": [{"name": "Priya Raman"}]},
    )
    client, _ = login(agency, Role.APPROVER)

    page = text(client, f"{INBOX}{approval.pk}/")

    assert "Send email &#x27;Q3&#x27; to ann@example.com and bob@example.com" in page
    assert "SDR Agent wants to run <code>" in page
    assert "(Send Email)" in page
    assert "ann@example.com\nbob@example.com" in page  # one per line, no table
    assert "&quot;subject&quot;: &quot;Q3&quot;" in page  # the exact JSON
    assert "Outreach e-mails" in page
    assert "Every outreach e-mail" in page
    assert "Risk rule &#x27;Outreach e-mails&#x27; matched" in page
    assert "High risk" in page
    assert "expires in 23 h" in page
    assert "Reach out to Ann." in page  # the run's instruction
    assert "Priya asked about pricing" in page
    assert "crm_search_contacts" in page
    assert "Priya Raman" in page
    assert reverse("admin:agents_execution_change", args=[approval.execution_id]) in page
    assert 'data-action="approve"' in page
    assert 'data-action="deny"' in page
    assert 'data-action="edit"' in page


def test_agent_written_text_is_escaped_everywhere(agency: Agency) -> None:
    script = "<script>alert(1)</script>"
    approval = waiting_approval(
        agency,
        agent=AgentFactory.create(agency=agency, name=f"Agent {script}"),
        arguments={"to": [f"a{script}@x.io"], "subject": script, "body": script},
    )
    ExecutionStepFactory.create(
        execution=approval.execution, step_number=1, reasoning=f"Thinking {script}"
    )
    question = open_question(agency, question=f"Which {script}?", options=[script])
    client, _ = login(agency, Role.APPROVER)

    for url in (INBOX, f"{INBOX}{approval.pk}/", f"{INBOX}questions/{question.pk}/"):
        page = text(client, url)
        assert script not in page, url
        assert "&lt;script&gt;" in page, url


@pytest.mark.parametrize(
    ("role", "decides"),
    [(Role.ADMIN, True), (Role.APPROVER, True), (Role.STAFF, False), (Role.VIEWER, False)],
)
def test_every_role_sees_but_only_admins_and_approvers_get_the_buttons(
    agency: Agency, role: str, decides: bool
) -> None:
    approval = waiting_approval(agency)
    question = open_question(agency, options=["Pro", "Team"])
    client, _ = login(agency, role)

    approval_page = text(client, f"{INBOX}{approval.pk}/")
    question_page = text(client, f"{INBOX}questions/{question.pk}/")

    assert ('data-action="approve"' in approval_page) is decides
    assert ('data-action="option"' in question_page) is decides
    assert ("Only the agency's admins and approvers" in approval_page) is not decides
    assert ("Only the agency's admins and approvers" in question_page) is not decides
    if not decides:
        assert "<form" not in approval_page.split('id="inbox"')[-1].split("inbox-item__main")[1]


def test_another_agencys_items_are_not_found(agency: Agency, other: Agency) -> None:
    approval = waiting_approval(other)
    question = open_question(other)
    client, _ = login(agency, Role.ADMIN)
    for url in (
        f"{INBOX}{approval.pk}/",
        f"{INBOX}{approval.pk}/deny/",
        f"{INBOX}{approval.pk}/edit/",
        f"{INBOX}questions/{question.pk}/",
    ):
        assert client.get(url).status_code == 404, url
    for url in (
        f"{INBOX}{approval.pk}/approve/",
        f"{INBOX}{approval.pk}/deny/",
        f"{INBOX}{approval.pk}/edit/",
        f"{INBOX}questions/{question.pk}/answer/",
    ):
        assert client.post(url, {"confirmed": "1", "reason": "x", "answer": "x"}).status_code == (
            404
        ), url
    made_up = "00000000-0000-0000-0000-000000000001"
    assert client.get(f"{INBOX}{made_up}/").status_code == 404


def test_a_settled_approval_shows_how_it_went(agency: Agency) -> None:
    approval = waiting_approval(agency)
    client, user = login(agency, Role.APPROVER)
    update(
        approval, status=ApprovalStatus.APPROVED, decided_by=user, decided_at=approval.created_at
    )
    assert approval.tool_call is not None
    update(
        approval.tool_call, status="denied", error="The tool is no longer allowed for this agent."
    )

    page = text(client, f"{INBOX}{approval.pk}/")

    assert f"Approved by {user}, but not run" in page
    assert "The tool is no longer allowed for this agent." in page
    assert 'data-action="approve"' not in page


def test_a_question_page_shows_options_and_a_correction_its_failures(agency: Agency) -> None:
    question = open_question(
        agency, question="Which plan?", options=["Pro", "Team"], allow_other=False
    )
    correction = open_question(
        agency,
        kind=QuestionKind.CORRECTION,
        question="The tool crm_get_contact failed 3 times in this run.",
        context={
            "tool": "crm_get_contact",
            "failures": [
                {
                    "arguments": {"email": "priya@"},
                    "error_code": "invalid_arguments",
                    "error": "'priya@' is not a 'email'",
                    "at": "2026-11-25T09:00:00+00:00",
                }
            ]
            * 3,
        },
    )
    client, _ = login(agency, Role.APPROVER)

    page = text(client, f"{INBOX}questions/{question.pk}/")
    assert 'value="Pro"' in page
    assert 'value="Team"' in page
    assert 'name="text"' not in page  # no free text: allow_other is off

    page = text(client, f"{INBOX}questions/{correction.pk}/")
    assert "Help needed" in page
    assert "failed 3 times" in page
    assert "&#x27;priya@&#x27; is not a &#x27;email&#x27;" in page
    assert "&quot;email&quot;: &quot;priya@&quot;" in page
    assert 'data-action="retry"' in page
    assert 'data-action="stop"' in page


# --- where approvers land --------------------------------------------------------------------


def test_an_approver_lands_on_the_inbox_and_others_on_the_home(agency: Agency) -> None:
    approver, _ = login(agency, Role.APPROVER)
    response = approver.get(reverse("admin:index"))
    assert (response.status_code, response["Location"]) == (302, INBOX)
    home = approver.get(reverse("admin:index") + "?home")
    assert home.status_code == 200
    assert 'id="staff-home"' in home.content.decode()
    assert 'href="/admin/?home"' in home.content.decode()  # the sidebar's Home
    for role in (Role.ADMIN, Role.STAFF, Role.VIEWER):
        client, _ = login(agency, role)
        assert client.get(reverse("admin:index")).status_code == 200, role


def test_a_superuser_opens_and_decides_any_agencys_item(
    agency: Agency, django_user_model: type[User]
) -> None:
    approval = waiting_approval(agency)
    root = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(root)

    assert 'data-action="approve"' in text(client, f"{INBOX}{approval.pk}/")
    assert client.post(f"{INBOX}{approval.pk}/approve/").status_code == 302
    assert fetch(Approval, approval.pk).status == ApprovalStatus.APPROVED


def test_the_admins_approvals_list_links_to_the_inbox_and_decides_nothing(agency: Agency) -> None:
    approval = waiting_approval(agency)
    client, _ = login(agency, Role.APPROVER)

    page = text(client, reverse("admin:approvals_approval_changelist"))
    assert f'href="{INBOX}{approval.pk}/">Decide in the inbox</a>' in page
    assert 'name="action"' not in page  # no bulk approve / deny
    change = text(client, reverse("admin:approvals_approval_change", args=[approval.pk]))
    assert f'href="{INBOX}{approval.pk}/"' in change
