"""Usage: daily rows, budgets that cannot be overspent, platform model prices."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import IntegrityError, connection, transaction

from agents.models import Agent
from core import tenancy
from tests.factories import AgencyFactory
from tests.usage.factories import BudgetFactory, ModelPriceFactory, UsageDailyFactory
from usage.models import Budget, ModelPrice, UsageDaily

pytestmark = pytest.mark.django_db


def test_platform_model_prices_are_seeded_and_read_only_for_agencies() -> None:
    agency = AgencyFactory.create()
    with tenancy.agency_context(agency.id):
        prices = {p.model: p for p in ModelPrice.objects.filter(agency__isnull=True)}
        with connection.cursor() as cursor:
            cursor.execute("UPDATE usage_modelprice SET input_per_mtok = 0")
            assert cursor.rowcount == 0
    assert {"gpt-4o", "gpt-4o-mini", "claude-sonnet-4-5", "claude-haiku-4-5"} <= set(prices)
    assert prices["gpt-4o"].input_per_mtok == Decimal("2.50")
    assert prices["gpt-4o"].output_per_mtok == Decimal("10.00")
    assert prices["claude-sonnet-4-5"].cache_write_per_mtok == Decimal("3.75")


def test_an_agency_price_overrides_nothing_for_other_agencies() -> None:
    own = ModelPriceFactory.create(model="gpt-4o", input_per_mtok=Decimal("2.00"))
    assert own.agency_id is not None
    other = AgencyFactory.create()
    with tenancy.agency_context(other.id):
        assert ModelPrice.objects.filter(model="gpt-4o").count() == 1
    with tenancy.agency_context(own.agency_id):
        assert ModelPrice.objects.filter(model="gpt-4o").count() == 2
        with pytest.raises(IntegrityError, match="unique_model"), transaction.atomic():
            ModelPriceFactory.create(agency=own.agency, model="gpt-4o")


def test_budget_cannot_be_overspent_by_reservations() -> None:
    budget = BudgetFactory.create(limit_usd=Decimal("5.00"))
    with tenancy.agency_context(budget.agency_id):
        rows = Budget.objects.filter(pk=budget.pk)
        rows.update(used_usd=Decimal("3.00"), reserved_usd=Decimal("2.00"))
        with pytest.raises(IntegrityError, match="within_limit"), transaction.atomic():
            rows.update(reserved_usd=Decimal("2.01"))
        assert rows.get().remaining_usd == Decimal(0)
    with pytest.raises(IntegrityError, match="unique_day"), transaction.atomic():
        BudgetFactory.create(agency=budget.agency, date=budget.date)


def test_daily_usage_has_one_row_per_agent_model_and_day_even_without_site() -> None:
    row = UsageDailyFactory.create(site=None)
    with pytest.raises(IntegrityError, match="unique_row"), transaction.atomic():
        UsageDailyFactory.create(agent=row.agent, site=None, date=row.date, model=row.model)
    UsageDailyFactory.create(agent=row.agent, site=None, date=row.date, model="gpt-4o")


def test_daily_usage_outlives_its_agent() -> None:
    row = UsageDailyFactory.create(agent_runs=3, cost_usd=Decimal("0.42"))
    assert row.agent_id is not None
    with tenancy.agency_context(row.agency_id):
        Agent.objects.filter(pk=row.agent_id).delete()
        kept = UsageDaily.objects.get(pk=row.pk)
    assert kept.agent_id == row.agent_id
    assert (kept.agent_runs, kept.cost_usd) == (3, Decimal("0.42"))
