"""The usage pages of the admin: the 14-day charts above the daily usage list and CSV exports of
what the list's filters select, for the user's agency only."""

from __future__ import annotations

import csv
import datetime
import io
from collections.abc import Callable
from decimal import Decimal

import pytest
from django.test import Client
from django.urls import reverse

from core.models import Agency, Role, User
from tests.admin.conftest import member
from tests.agents.factories import AgentFactory
from tests.factories import AgencyFactory
from tests.usage.factories import BudgetFactory, UsageDailyFactory, UsagePeriodFactory
from usage.models import today

pytestmark = pytest.mark.django_db

DAILY = reverse("admin:usage_usagedaily_changelist")
DAILY_CSV = reverse("admin:usage_usagedaily_export_csv")


@pytest.fixture
def agency() -> Agency:
    agency = AgencyFactory.create()
    writer = AgentFactory.create(agency=agency, name="Writer")
    triage = AgentFactory.create(agency=agency, site=writer.site, name="=HYPERLINK(1)")
    UsageDailyFactory.create(agent=writer, cost_usd=Decimal("1.50"), agent_runs=3)
    UsageDailyFactory.create(
        agent=writer,
        date=today() - datetime.timedelta(days=2),
        cost_usd=Decimal("0.25"),
        tokens_input=100,
        agent_runs=1,
    )
    UsageDailyFactory.create(agent=triage, model="claude-x", cost_usd=Decimal("2.00"))
    # Older than the charts' 14 days: exported, not drawn.
    UsageDailyFactory.create(
        agent=writer, date=today() - datetime.timedelta(days=40), cost_usd=Decimal("9.00")
    )
    return agency


@pytest.fixture
def other_agency() -> Agency:
    agency = AgencyFactory.create()
    UsageDailyFactory.create(
        agent=AgentFactory.create(agency=agency, name="Stranger"), cost_usd=Decimal("7.00")
    )
    return agency


@pytest.fixture
def client_of() -> Callable[[Agency, str], Client]:
    def make(agency: Agency, role: str = Role.STAFF) -> Client:
        client = Client()
        client.force_login(member(agency, role))
        return client

    return make


def _rows(response: object) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(response.content.decode())))  # type: ignore[attr-defined]


def test_daily_usage_list_draws_the_agencys_last_14_days(
    agency: Agency, other_agency: Agency, client_of: Callable[[Agency, str], Client]
) -> None:
    response = client_of(agency, Role.STAFF).get(DAILY)

    assert response.status_code == 200
    charts = response.context["usage_charts"]
    assert charts.total_cost_usd == Decimal("3.75")  # not 9.00 (too old), not 7.00 (theirs)
    assert charts.total_runs == 4
    assert charts.date_to == today()
    text = response.content.decode()
    assert text.count('class="chart"') == 3
    assert "Export CSV" in text


def test_charts_follow_the_lists_filters(
    agency: Agency, client_of: Callable[[Agency, str], Client]
) -> None:
    response = client_of(agency, Role.STAFF).get(DAILY, {"model": "claude-x"})
    assert response.context["usage_charts"].total_cost_usd == Decimal("2.00")
    assert "model=claude-x" in response.context["csv_export_url"]

    old = today() - datetime.timedelta(days=40)
    drilled = client_of(agency, Role.STAFF).get(
        DAILY, {"date__year": old.year, "date__month": old.month, "date__day": old.day}
    )
    charts = drilled.context["usage_charts"]
    assert (charts.date_to, charts.total_cost_usd) == (old, Decimal("9.00"))


def test_csv_export_has_the_agencys_rows_only(
    agency: Agency, other_agency: Agency, client_of: Callable[[Agency, str], Client]
) -> None:
    response = client_of(agency, Role.VIEWER).get(DAILY_CSV)  # reading is enough

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment;" in response["Content-Disposition"]
    rows = _rows(response)
    assert len(rows) == 4
    assert "agency" not in rows[0]
    assert {row["agent"] for row in rows} == {"Writer", "'=HYPERLINK(1)"}  # no formula runs
    assert sum(Decimal(row["cost_usd"]) for row in rows) == Decimal("12.75")
    assert rows[0]["date"] == today().isoformat()  # the list's order: newest first


def test_csv_export_respects_the_lists_filters_and_search(
    agency: Agency, client_of: Callable[[Agency, str], Client]
) -> None:
    client = client_of(agency, Role.STAFF)
    by_model = _rows(client.get(DAILY_CSV, {"model": "claude-x"}))
    assert [row["cost_usd"] for row in by_model] == ["2.000000"]

    searched = _rows(client.get(DAILY_CSV, {"q": "claude"}))
    assert len(searched) == 1

    day = today() - datetime.timedelta(days=2)
    drilled = _rows(
        client.get(
            DAILY_CSV, {"date__year": day.year, "date__month": day.month, "date__day": day.day}
        )
    )
    assert [(row["date"], row["tokens_input"]) for row in drilled] == [(day.isoformat(), "100")]

    # Pagination is not a filter: every page is exported.
    assert len(_rows(client.get(DAILY_CSV, {"p": "2"}))) == 4
    assert client.get(DAILY_CSV, {"nonsense__field": "1"}).status_code == 400


def test_csv_export_link_keeps_the_filters_but_not_the_page(
    agency: Agency, client_of: Callable[[Agency, str], Client]
) -> None:
    response = client_of(agency, Role.STAFF).get(DAILY, {"model": "gpt-4o-mini", "o": "-1"})
    url = response.context["csv_export_url"]
    assert url.startswith(DAILY_CSV)
    assert "model=gpt-4o-mini" in url
    assert "p=" not in url


def test_superusers_export_names_the_agency(
    agency: Agency, other_agency: Agency, django_user_model: type[User]
) -> None:
    client = Client()
    client.force_login(django_user_model.objects.create_superuser("root", "r@example.com", "pw"))
    rows = _rows(client.get(DAILY_CSV, {"agency__id__exact": str(other_agency.pk)}))
    assert [(row["agency"], row["agent"]) for row in rows] == [(other_agency.slug, "Stranger")]


def test_csv_export_needs_a_login(agency: Agency) -> None:
    response = Client().get(DAILY_CSV)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


def test_budget_and_period_lists_export_csv_too(
    agency: Agency, other_agency: Agency, client_of: Callable[[Agency, str], Client]
) -> None:
    BudgetFactory.create(agency=agency, limit_usd=Decimal("5.00"))
    BudgetFactory.create(agency=other_agency, limit_usd=Decimal("99.00"))
    UsagePeriodFactory.create(agency=agency, total_agent_runs=12)
    UsagePeriodFactory.create(agency=other_agency, total_agent_runs=99)
    client = client_of(agency, Role.STAFF)

    budgets = _rows(client.get(reverse("admin:usage_budget_export_csv")))
    assert [row["limit_usd"] for row in budgets] == ["5.0000"]
    periods = _rows(client.get(reverse("admin:usage_usageperiod_export_csv")))
    assert [row["total_agent_runs"] for row in periods] == ["12"]
    assert "Export CSV" in client.get(reverse("admin:usage_budget_changelist")).content.decode()


def test_a_usage_period_page_names_its_fields_and_providers_in_words(
    client_of: Callable[[Agency, str], Client], agency: Agency
) -> None:
    period = UsagePeriodFactory.create(
        agency=agency,
        total_agent_runs=12,
        estimated_cost=Decimal("0.42"),
        usage_by_provider={"openai_compatible": {"runs": 12}},
    )
    client = client_of(agency, Role.STAFF)

    listed = client.get(reverse("admin:usage_usageperiod_changelist")).content.decode()
    page = client.get(reverse("admin:usage_usageperiod_change", args=[period.pk]))

    assert "12 of 500 included" in listed
    assert page.status_code == 200
    text = page.content.decode()
    assert "OpenAI-compatible (local): runs 12" in text
    assert "0.420000" not in text  # the estimated cost as every cost: $0.42
    assert "openai_compatible" not in text
    assert "Total agent runs" not in text
