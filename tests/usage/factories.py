"""Usage app factories."""

from __future__ import annotations

import datetime
from decimal import Decimal

import factory

from agents.models import ProviderName
from tests.agents.factories import AgentFactory
from tests.factories import AgencyFactory, TenantFactory
from usage.models import Budget, EvaluationBudget, ModelPrice, UsageDaily, UsagePeriod, today


class UsageDailyFactory(TenantFactory[UsageDaily]):
    class Meta:
        model = UsageDaily

    agent = factory.SubFactory(AgentFactory)
    agency = factory.SelfAttribute("agent.agency")
    site = factory.SelfAttribute("agent.site")
    date = factory.LazyFunction(today)
    provider = ProviderName.OPENAI
    model = "gpt-4o-mini"


class UsagePeriodFactory(TenantFactory[UsagePeriod]):
    class Meta:
        model = UsagePeriod

    agency = factory.SubFactory(AgencyFactory)
    period_start = factory.LazyFunction(lambda: today().replace(day=1))
    period_end = factory.LazyAttribute(
        lambda o: (
            (o.period_start + datetime.timedelta(days=32)).replace(day=1)
            - datetime.timedelta(days=1)
        )
    )


class BudgetFactory(TenantFactory[Budget]):
    class Meta:
        model = Budget

    agency = factory.SubFactory(AgencyFactory)
    date = factory.LazyFunction(today)
    limit_usd = Decimal("5.00")


class EvaluationBudgetFactory(TenantFactory[EvaluationBudget]):
    class Meta:
        model = EvaluationBudget

    agency = factory.SubFactory(AgencyFactory)
    date = factory.LazyFunction(today)
    limit_usd = Decimal("1.00")


class ModelPriceFactory(TenantFactory[ModelPrice]):
    """An agency's own price (platform prices come from the data migration)."""

    class Meta:
        model = ModelPrice

    agency = factory.SubFactory(AgencyFactory)
    provider = ProviderName.OPENAI
    model = factory.Sequence(lambda n: f"custom-model-{n}")
    input_per_mtok = Decimal("1.00")
    output_per_mtok = Decimal("2.00")
