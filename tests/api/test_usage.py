"""Usage summary over REST: totals per day, agent and model, for the agency only."""

from __future__ import annotations

import datetime
from decimal import Decimal

from core.models import Role
from tests.agents.factories import AgentFactory
from tests.api.conftest import fields_of
from tests.usage.factories import UsageDailyFactory
from usage.models import today

URL = "/api/v1/usage/summary/"


def test_summary_groups_by_day_agent_and_model(tenant_a, tenant_b, as_role) -> None:
    day = today()
    yesterday = day - datetime.timedelta(days=1)
    alpha = AgentFactory.create(agency=tenant_a.agency, site=tenant_a.site, name="Alpha")
    beta = AgentFactory.create(agency=tenant_a.agency, site=tenant_a.site, name="Beta")
    UsageDailyFactory.create(agent=alpha, date=day, llm_calls=2, cost_usd=Decimal("0.50"))
    UsageDailyFactory.create(agent=beta, date=yesterday, llm_calls=1, cost_usd=Decimal("0.25"))
    UsageDailyFactory.create(
        agent=beta, date=day, model="claude-x", provider="anthropic", cost_usd=Decimal("1")
    )
    theirs = AgentFactory.create(agency=tenant_b.agency, site=tenant_b.site)
    UsageDailyFactory.create(agent=theirs, date=day, llm_calls=100, cost_usd=Decimal("99"))

    summary = as_role(Role.VIEWER).get(URL).json()
    assert summary["totals"]["llm_calls"] == 3
    assert summary["totals"]["cost_usd"] == "1.750000"
    assert [d["date"] for d in summary["by_day"]] == [yesterday.isoformat(), day.isoformat()]
    assert [(a["agent_name"], a["cost_usd"]) for a in summary["by_agent"]] == [
        ("Beta", "1.250000"),
        ("Alpha", "0.500000"),
    ]
    assert {m["model"] for m in summary["by_model"]} == {"gpt-4o-mini", "claude-x"}
    only_today = as_role(Role.VIEWER).get(URL, {"date_from": day.isoformat()}).json()
    assert only_today["totals"]["cost_usd"] == "1.500000"
    for_alpha = as_role(Role.VIEWER).get(URL, {"agent": str(alpha.id)}).json()
    assert for_alpha["totals"]["llm_calls"] == 2


def test_empty_range_is_zeros(tenant_a, as_role) -> None:
    summary = as_role(Role.VIEWER).get(URL).json()
    assert summary["totals"]["agent_runs"] == 0
    assert summary["by_day"] == []


def test_bad_ranges_are_refused(tenant_a, as_role) -> None:
    client = as_role(Role.VIEWER)
    # Well-formed dates in an order or span the endpoint does not take: 422.
    assert "date_from" in fields_of(
        client.get(URL, {"date_from": "2026-02-01", "date_to": "2026-01-01"}), 422
    )
    assert "date_from" in fields_of(
        client.get(URL, {"date_from": "2020-01-01", "date_to": "2026-01-01"}), 422
    )
    assert "date_to" in fields_of(client.get(URL, {"date_to": "soon"}))
    assert "agent" in fields_of(client.get(URL, {"agent": "x"}))
    assert client.get(URL, {"date_to": "0001-01-02"}).status_code == 200


def test_usage_needs_a_member(db, superuser) -> None:
    from rest_framework.test import APIClient

    from tests.api.conftest import token_client
    from tests.factories import UserFactory

    assert APIClient().get(URL).status_code == 401
    assert token_client(UserFactory.create()).get(URL).status_code == 403
    assert token_client(superuser).get(URL).status_code == 200
