"""The staff home (the admin index): one agency's runs, what waits for a person, today's spend,
success rates and the last 14 days, for that agency only; its panels as fragments; who sees what."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from agents.models import Agent, ExecutionStatus, StopReason
from approvals.models import Approval
from core import tenancy
from core.models import Agency, Role, User
from live import home, views
from tests.agents.factories import AgentFactory, ExecutionFactory, ExecutionStepFactory
from tests.approvals.factories import ApprovalFactory
from tests.factories import AgencyFactory, MembershipFactory, UserFactory
from tests.tools.factories import ToolCallFactory
from tests.usage.factories import BudgetFactory, UsageDailyFactory
from usage.models import today

pytestmark = pytest.mark.django_db

HOME = "/admin/"


@dataclass
class Seeded:
    agency: Agency
    agent: Agent
    other_agent: Agent
    running_id: str
    failed_id: str
    approval: Approval
    question_id: str


def seed(agency: Agency, tag: str, *, budget: bool = True) -> Seeded:
    """Two agents; runs in every state that matters; usage today and 3 days ago."""
    agent = AgentFactory.create(agency=agency, name=f"Writer {tag}")
    other = AgentFactory.create(agency=agency, site=agent.site, name=f"Triage {tag}")
    now = timezone.now()
    running = ExecutionFactory.create(
        agent=agent,
        status=ExecutionStatus.RUNNING,
        started_at=now - datetime.timedelta(minutes=2),
        current_step=3,
        cost_usd=Decimal("0.0123"),
    )
    ExecutionStepFactory.create(execution=running, step_number=3, step_type="act")
    ExecutionFactory.create(agent=other, status=ExecutionStatus.PENDING)
    # Parked on a timer: in progress, but no question for a person.
    ExecutionFactory.create(
        agent=other,
        status=ExecutionStatus.WAITING_INPUT,
        input_request={"kind": "timer", "until": now.isoformat()},
        wait_until=now,
    )
    question = ExecutionFactory.create(
        agent=other,
        status=ExecutionStatus.WAITING_INPUT,
        input_request={"question": f"Which plan for {tag}?"},
    )
    waiting = ExecutionFactory.create(agent=agent, status=ExecutionStatus.WAITING_APPROVAL)
    approval = ApprovalFactory.create(
        tool_call=ToolCallFactory.create(execution=waiting),
        action_description=f"Send 12 e-mails for {tag}",
    )
    for _ in range(3):
        ExecutionFactory.create(
            agent=agent,
            status=ExecutionStatus.COMPLETED,
            stop_reason=StopReason.FINAL_ANSWER,
            completed_at=now,
        )
    failed = ExecutionFactory.create(
        agent=agent,
        status=ExecutionStatus.FAILED,
        stop_reason=StopReason.ERROR,
        error=f"Provider refused the key of {tag}",
        completed_at=now,
    )
    ExecutionFactory.create(
        agent=other, status=ExecutionStatus.CANCELLED, stop_reason=StopReason.CANCELLED
    )
    UsageDailyFactory.create(
        agent=agent,
        cost_usd=Decimal("1.25"),
        tokens_input=1000,
        tokens_output=500,
        agent_runs=4,
    )
    UsageDailyFactory.create(
        agent=other,
        date=today() - datetime.timedelta(days=3),
        cost_usd=Decimal("0.50"),
        tokens_input=200,
        tokens_output=100,
        agent_runs=1,
    )
    if budget:
        BudgetFactory.create(
            agency=agency,
            limit_usd=Decimal("5.00"),
            used_usd=Decimal("1.25"),
            reserved_usd=Decimal("0.25"),
        )
    return Seeded(
        agency=agency,
        agent=agent,
        other_agent=other,
        running_id=str(running.pk),
        failed_id=str(failed.pk),
        approval=approval,
        question_id=str(question.pk),
    )


@pytest.fixture
def mine() -> Seeded:
    return seed(AgencyFactory.create(name="Mine"), "mine")


@pytest.fixture
def theirs() -> Seeded:
    return seed(AgencyFactory.create(name="Theirs"), "theirs")


@pytest.fixture
def login() -> Callable[..., Client]:
    def make(agency: Agency | None = None, role: str = Role.STAFF, **user: object) -> Client:
        if agency is None:
            account = UserFactory.create(**user)
        else:
            account = MembershipFactory.create(agency=agency, role=role).user
        client = Client()
        client.force_login(account)
        return client

    return make


@pytest.fixture
def superuser(django_user_model: type[User]) -> User:
    return django_user_model.objects.create_superuser("root", "root@example.com", "pw")


def _text(response: object) -> str:
    return response.content.decode()  # type: ignore[attr-defined]


# --- the page ---------------------------------------------------------------------------------


def test_home_shows_the_agencys_numbers_and_none_of_another_agencys(
    mine: Seeded, theirs: Seeded, login: Callable[..., Client]
) -> None:
    response = login(mine.agency).get(HOME)

    assert response.status_code == 200
    context = response.context
    assert context["home_agency"] == mine.agency
    # pending, running, the timer-parked run, the question and the approval wait
    assert context["in_progress_count"] == 5
    assert {str(run.pk) for run in context["runs"]} >= {mine.running_id}
    assert (context["waiting"].approvals, context["waiting"].questions) == (1, 1)
    assert [str(run.pk) for run in context["questions"]] == [mine.question_id]
    assert [a.pk for a in context["approvals"]] == [mine.approval.pk]
    assert len(context["recent"]) == 5  # 3 completed, 1 failed, 1 cancelled
    spend = context["spend"]
    assert (spend.spent_usd, spend.reserved_usd, spend.limit_usd) == (
        Decimal("1.25"),
        Decimal("0.25"),
        Decimal("5.00"),
    )
    assert spend.percent == 30
    rates = {row.agent_name: row for row in context["success_rates"]}
    assert rates["Writer mine"].rate == 75  # 3 completed, 1 failed
    assert rates["Triage mine"].rate is None  # only a cancelled run: nobody's fault
    charts = context["charts"]
    assert (charts.total_cost_usd, charts.total_tokens, charts.total_runs) == (
        Decimal("1.75"),
        1800,
        5,
    )

    text = _text(response)
    for shown in ("Writer mine", "Which plan for mine?", "Send 12 e-mails for mine"):
        assert shown in text
    assert "Provider refused the key of mine" in text
    assert "Daily budget exceeded" not in text
    assert "Final answer" in text  # a completion's reason
    for hidden in ("theirs", theirs.running_id, str(theirs.approval.pk), theirs.question_id):
        assert hidden not in text


def test_home_draws_its_charts_with_unfolds_chart_js_and_loads_its_live_script(
    mine: Seeded, login: Callable[..., Client]
) -> None:
    text = _text(login(mine.agency).get(HOME))

    assert "unfold/js/chart/chart.js" in text
    assert "unfold/js/htmx/htmx.js" in text
    # Drawn by live/home.js, which redraws them when their panel reloads; unfold's component
    # (class="chart") draws once, at load.
    assert text.count("data-home-chart=") == 3
    assert 'class="chart"' not in text
    assert 'data-format="usd"' in text
    assert "live/home.js" in text
    assert 'data-live-socket="/ws/agency/"' in text
    assert '<script src="http' not in text  # nothing fetched from elsewhere


def test_todays_spend_without_a_budget_row_today_uses_the_latest_limit_and_usage(
    login: Callable[..., Client],
) -> None:
    agency = AgencyFactory.create()
    seeded = seed(agency, "x", budget=False)
    BudgetFactory.create(
        agency=agency, date=today() - datetime.timedelta(days=2), limit_usd=Decimal("8.00")
    )
    with tenancy.platform_context():
        spend = home.spend_today(agency=seeded.agency)
    assert (spend.spent_usd, spend.limit_usd, spend.percent) == (
        Decimal("1.25"),
        Decimal("8.00"),
        16,
    )


def test_an_agency_without_any_budget_says_runs_are_not_limited(
    login: Callable[..., Client],
) -> None:
    agency = AgencyFactory.create()
    seed(agency, "x", budget=False)
    text = _text(login(agency).get(HOME))
    assert "No daily budget is set" in text


def test_viewer_sees_the_home_read_only(mine: Seeded, login: Callable[..., Client]) -> None:
    response = login(mine.agency, Role.VIEWER).get(HOME)

    assert response.status_code == 200
    assert response.context["can_decide"] is False
    text = _text(response)
    assert "Writer mine" in text
    assert "Decide in the inbox" not in text
    assert "Read-only view" in text
    # Nothing on the home posts anything (the header's logout form aside).
    content = text[text.index('id="staff-home"') :]
    assert "<form" not in content
    assert 'method="post"' not in content.lower()


def test_approver_lands_on_what_waits_for_them(mine: Seeded, login: Callable[..., Client]) -> None:
    # An approver's /admin/ leads to the inbox; the home is /admin/?home (the sidebar's Home).
    landing = login(mine.agency, Role.APPROVER).get(HOME)
    assert landing.status_code == 302
    assert landing["Location"] == reverse("approvals_inbox:list")
    approver = _text(login(mine.agency, Role.APPROVER).get(f"{HOME}?home"))
    staff = _text(login(mine.agency, Role.STAFF).get(HOME))

    assert approver.index('id="home-waiting"') < approver.index('id="home-in-progress"')
    assert "Decide in the inbox" in approver
    assert reverse("approvals_inbox:list") in approver
    assert staff.index('id="home-in-progress"') < staff.index('id="home-waiting"')
    assert "Decide in the inbox" not in staff  # staff may look, not decide


def test_admin_index_and_view_site_lead_to_the_home(
    mine: Seeded, login: Callable[..., Client]
) -> None:
    client = login(mine.agency)

    index = client.get(reverse("admin:index"))
    assert index.status_code == 200
    assert 'id="staff-home"' in _text(index)
    site_url = index.context["site_url"]
    root = client.get(site_url)
    assert root.status_code == 302
    assert root["Location"] == reverse("admin:index")


def test_the_site_root_asks_a_visitor_to_log_in() -> None:
    response = Client().get("/", follow=True)
    assert response.redirect_chain[-1][0].startswith(reverse("admin:login"))


def test_a_staff_login_without_agency_gets_a_message(login: Callable[..., Client]) -> None:
    response = login(None).get(HOME)
    assert response.status_code == 200
    assert "No agency" in _text(response)
    assert response.context["home_agency"] is None


def test_superuser_picks_an_agency_then_sees_its_home(
    mine: Seeded, theirs: Seeded, superuser: User
) -> None:
    client = Client()
    client.force_login(superuser)

    picker = client.get(HOME)
    assert picker.status_code == 200
    assert f"?agency={mine.agency.pk}" in _text(picker)
    assert f"?agency={theirs.agency.pk}" in _text(picker)

    text = _text(client.get(HOME, {"agency": str(theirs.agency.pk)}))
    assert "Writer theirs" in text
    assert "Writer mine" not in text
    assert f'data-live-socket="/ws/agency/?agency={theirs.agency.pk}"' in text
    # remembered for the next visit, forgotten on request
    assert "Writer theirs" in _text(client.get(HOME))
    assert "Pick an agency" in _text(client.get(HOME, {"agency": ""}))


def test_a_member_cannot_pick_another_agency(
    mine: Seeded, theirs: Seeded, login: Callable[..., Client]
) -> None:
    text = _text(login(mine.agency).get(HOME, {"agency": str(theirs.agency.pk)}))
    assert "Writer mine" in text
    assert "Writer theirs" not in text


# --- the fragments ----------------------------------------------------------------------------


def _panel(name: str) -> str:
    return reverse("live:home-panel", args=[name])


@pytest.mark.parametrize("name", list(views.PANELS))
def test_fragments_show_the_members_agency_only(
    name: str, mine: Seeded, theirs: Seeded, login: Callable[..., Client]
) -> None:
    client = login(mine.agency)
    # Naming another agency changes nothing for a member.
    response = client.get(_panel(name), {"agency": str(theirs.agency.pk)})

    assert response.status_code == 200
    assert response["X-Home-Panel"] == name
    text = _text(response)
    assert "theirs" not in text
    assert theirs.running_id not in text
    assert "<html" not in text  # a fragment, not a page


def test_fragments_carry_the_panels_rows(mine: Seeded, login: Callable[..., Client]) -> None:
    client = login(mine.agency)
    assert mine.running_id in _text(client.get(_panel("in_progress")))
    assert mine.failed_id in _text(client.get(_panel("recent")))
    waiting = _text(client.get(_panel("waiting")))
    assert "Which plan for mine?" in waiting
    assert str(mine.approval.pk) in waiting
    assert 'data-stat="waiting">2<' in _text(client.get(_panel("summary")))
    # A run that ends moves the charts and the success rates: they reload with the rest.
    charts = _text(client.get(_panel("charts")))
    # Runs that ended (usage rows are written at a run's end), not the running ones the
    # executions list counts too: it said "Runs, last 14 days: 5" beside "All 6".
    assert "Runs ended, last 14 days: 5" in charts
    assert charts.count("data-home-chart=") == 3
    assert "Writer mine" in _text(client.get(_panel("success")))


def test_fragments_need_a_staff_login(mine: Seeded, login: Callable[..., Client]) -> None:
    anonymous = Client().get(_panel("summary"))
    assert anonymous.status_code == 302
    assert anonymous["Location"].startswith(reverse("admin:login"))

    assert login(None).get(_panel("summary")).status_code == 404  # no agency
    not_staff = login(None, is_staff=False).get(_panel("summary"))
    assert not_staff.status_code == 302


def test_fragments_are_read_only_and_named(mine: Seeded, login: Callable[..., Client]) -> None:
    client = login(mine.agency)
    assert client.post(_panel("summary")).status_code == 405
    assert client.get(_panel("nope")).status_code == 404


def test_superusers_fragments_show_the_agency_they_name(
    mine: Seeded, theirs: Seeded, superuser: User
) -> None:
    client = Client()
    client.force_login(superuser)
    text = _text(client.get(_panel("in_progress"), {"agency": str(theirs.agency.pk)}))
    assert theirs.running_id in text
    assert mine.running_id not in text
    assert client.get(_panel("in_progress")).status_code == 404  # none picked


# --- the selectors ----------------------------------------------------------------------------


def test_selectors_do_not_return_other_agencies_rows(mine: Seeded, theirs: Seeded) -> None:
    """Read where row-level security shows every agency (a superuser's context): the selectors'
    own filter is what keeps the other agency out."""
    agency = mine.agency
    with tenancy.platform_context():
        rows = [
            *home.runs_in_progress(agency=agency, limit=100),
            *home.recent_finished(agency=agency, limit=100),
            *home.pending_approvals(agency=agency, limit=100),
            *home.open_questions(agency=agency, limit=100),
        ]
        assert rows
        assert {row.agency_id for row in rows} == {agency.pk}
        assert home.count_in_progress(agency=agency) == 5
        assert home.waiting_counts(agency=agency).total == 2
        assert home.spend_today(agency=agency).spent_usd == Decimal("1.25")
        names = {row.agent_name for row in home.agent_success_rates(agency=agency)}
        assert names == {"Writer mine", "Triage mine"}
        usage = home.usage_days(agency=agency)
        assert sum(day.cost_usd for day in usage) == Decimal("1.75")
        assert len(usage) == 14


def test_waiting_badge_counts_approvals_and_questions(
    mine: Seeded, theirs: Seeded, rf: object, superuser: User
) -> None:
    membership = MembershipFactory.create(agency=mine.agency, role=Role.APPROVER)
    request = rf.get("/admin/")  # type: ignore[attr-defined]
    request.user = membership.user
    request.membership = membership
    request.session = {}
    with tenancy.agency_context(mine.agency.pk):
        assert views.waiting_badge(request) == "2"

    request.user, request.membership = superuser, None
    with tenancy.platform_context():
        assert views.waiting_badge(request) is None  # no agency picked


def test_home_reads_a_fixed_number_of_queries_however_many_rows(
    mine: Seeded, login: Callable[..., Client], django_assert_max_num_queries: Any
) -> None:
    client = login(mine.agency)
    with CaptureQueriesContext(connection) as first:
        client.get(HOME)
    seed(mine.agency, "more", budget=False)  # twice the runs, approvals, questions and agents
    with django_assert_max_num_queries(len(first)):
        client.get(HOME)


def test_logging_in_on_the_login_page_itself_lands_on_the_home(mine: Seeded) -> None:
    user = MembershipFactory.create(agency=mine.agency).user
    response = Client().post(
        reverse("admin:login"), {"username": user.username, "password": "pw-for-tests"}
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:index")
