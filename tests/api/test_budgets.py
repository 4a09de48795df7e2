"""Daily budgets and billing-period quotas over REST: members read them; agency admins set a
day's limit (never below what that day already spent or reserved); quotas are read-only."""

from __future__ import annotations

import datetime
import uuid
from decimal import Decimal

import pytest

from core import tenancy
from core.models import Role
from tests.api.conftest import count, fields_of
from tests.usage.factories import BudgetFactory, UsagePeriodFactory
from usage.models import Budget, today
from usage.services import budget_reserve

URL = "/api/v1/budgets/"
PERIODS = "/api/v1/usage/periods/"


def _limit(budget_id: str | uuid.UUID) -> Decimal:
    with tenancy.platform_context():
        return Budget.objects.get(pk=budget_id).limit_usd


def test_admin_sets_lists_changes_and_deletes_a_budget(tenant_a, as_role) -> None:
    client = as_role(Role.ADMIN)
    created = client.post(URL, {"limit_usd": "20.00"}, format="json")
    assert created.status_code == 201, created.json()
    data = created.json()
    assert data["date"] == today().isoformat()
    assert data["remaining_usd"] == "20.000000"
    tomorrow = (today() + datetime.timedelta(days=1)).isoformat()
    assert client.post(URL, {"date": tomorrow, "limit_usd": "5"}, format="json").status_code == 201
    listed = client.get(URL).json()["results"]
    assert [b["date"] for b in listed] == [tomorrow, data["date"]]
    assert len(client.get(URL, {"date_to": data["date"]}).json()["results"]) == 1

    changed = client.patch(f"{URL}{data['id']}/", {"limit_usd": "50"}, format="json")
    assert changed.status_code == 200, changed.json()
    assert _limit(data["id"]) == Decimal("50")
    assert client.delete(f"{URL}{data['id']}/").status_code == 204
    assert count(Budget, agency=tenant_a.agency) == 1


def test_a_limit_below_what_is_spent_or_reserved_is_refused(tenant_a, as_role) -> None:
    budget = BudgetFactory.create(agency=tenant_a.agency, limit_usd=Decimal("10"))
    with tenancy.agency_context(tenant_a.agency.id):
        fits, _ = budget_reserve(agency_id=tenant_a.agency.id, amount=Decimal("4"))
    assert fits
    response = as_role(Role.ADMIN).patch(f"{URL}{budget.id}/", {"limit_usd": "3"}, format="json")
    assert "cannot be lower" in fields_of(response)["limit_usd"][0]
    assert _limit(budget.id) == Decimal("10")
    ok = as_role(Role.ADMIN).patch(f"{URL}{budget.id}/", {"limit_usd": "4"}, format="json")
    assert ok.status_code == 200, ok.json()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"limit_usd": "-1"}, "limit_usd"),
        ({"limit_usd": "abc"}, "limit_usd"),
        ({"limit_usd": "123456789.5"}, "limit_usd"),
        ({"limit_usd": "1", "used_usd": "0"}, "used_usd"),
        ({"limit_usd": "1", "date": "yesterday"}, "date"),
    ],
)
def test_bad_budgets_are_400_and_nothing_written(tenant_a, as_role, body, field) -> None:
    assert field in fields_of(as_role(Role.ADMIN).post(URL, body, format="json"))
    assert count(Budget, agency=tenant_a.agency) == 0


def test_one_budget_per_day(tenant_a, as_role) -> None:
    BudgetFactory.create(agency=tenant_a.agency)
    errors = fields_of(as_role(Role.ADMIN).post(URL, {"limit_usd": "1"}, format="json"), 409)
    assert "already has a budget" in errors["date"][0]
    assert count(Budget, agency=tenant_a.agency) == 1


def test_another_agencys_budget_and_periods_are_not_found(tenant_a, tenant_b, as_role) -> None:
    theirs = BudgetFactory.create(agency=tenant_b.agency)
    period = UsagePeriodFactory.create(agency=tenant_b.agency)
    client = as_role(Role.ADMIN)
    assert client.get(f"{URL}{theirs.id}/").status_code == 404
    assert client.patch(f"{URL}{theirs.id}/", {"limit_usd": "1"}, format="json").status_code == 404
    assert client.delete(f"{URL}{theirs.id}/").status_code == 404
    assert client.get(URL).json()["results"] == []
    assert client.get(f"{PERIODS}{period.id}/").status_code == 404
    assert client.get(PERIODS).json()["results"] == []
    assert _limit(theirs.id) == Decimal("5.00")


@pytest.mark.parametrize("role", [Role.STAFF, Role.APPROVER, Role.VIEWER])
def test_only_agency_admins_set_budgets(tenant_a, as_role, role) -> None:
    budget = BudgetFactory.create(agency=tenant_a.agency)
    client = as_role(role)
    assert client.get(f"{URL}{budget.id}/").status_code == 200
    assert client.post(URL, {"limit_usd": "1"}, format="json").status_code == 403
    assert client.patch(f"{URL}{budget.id}/", {"limit_usd": "9"}, format="json").status_code == 403
    assert client.delete(f"{URL}{budget.id}/").status_code == 403
    assert _limit(budget.id) == Decimal("5.00")


def test_quotas_are_listed_read_only(tenant_a, as_role) -> None:
    period = UsagePeriodFactory.create(agency=tenant_a.agency, total_agent_runs=12)
    client = as_role(Role.VIEWER)
    rows = client.get(PERIODS).json()["results"]
    assert [(r["id"], r["total_agent_runs"], r["included_runs"]) for r in rows] == [
        (str(period.id), 12, 500)
    ]
    admin = as_role(Role.ADMIN)
    assert (
        admin.patch(f"{PERIODS}{period.id}/", {"included_runs": 1}, format="json").status_code
        == 405
    )
