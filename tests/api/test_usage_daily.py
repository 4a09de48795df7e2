"""Daily usage rows over REST: filtered by date range, agent, provider and model; paginated
JSON, or CSV with ``Accept: text/csv``; the agency's rows only."""

from __future__ import annotations

import csv
import datetime
import io
from decimal import Decimal

from agents.models import Agent
from core.models import Role
from tests.agents.factories import AgentFactory
from tests.api.conftest import Tenant, fields_of
from tests.usage.factories import UsageDailyFactory
from usage.api.daily import COLUMNS
from usage.models import UsageDaily, today

URL = "/api/v1/usage/daily/"


def _rows(tenant_a: Tenant, tenant_b: Tenant) -> tuple[Agent, Agent, list[UsageDaily], Agent]:
    day = today()
    alpha = AgentFactory.create(agency=tenant_a.agency, site=tenant_a.site, name="Alpha")
    beta = AgentFactory.create(agency=tenant_a.agency, site=tenant_a.site, name="=HYPERLINK(1)")
    rows = [
        UsageDailyFactory.create(agent=alpha, date=day, llm_calls=2, cost_usd=Decimal("0.5")),
        UsageDailyFactory.create(
            agent=beta, date=day - datetime.timedelta(days=3), model="claude-x",
            provider="anthropic", cost_usd=Decimal("1"),
        ),
        UsageDailyFactory.create(agent=alpha, date=day - datetime.timedelta(days=40)),
    ]  # fmt: skip
    theirs = AgentFactory.create(agency=tenant_b.agency, site=tenant_b.site)
    UsageDailyFactory.create(agent=theirs, date=day, cost_usd=Decimal("99"))
    return alpha, beta, rows, theirs


def test_rows_in_the_range_newest_first_with_filters(tenant_a, tenant_b, as_role) -> None:
    alpha, _beta, rows, _theirs = _rows(tenant_a, tenant_b)
    client = as_role(Role.VIEWER)
    body = client.get(URL).json()  # default: the last 30 days
    assert body["count"] == 2
    assert [r["id"] for r in body["results"]] == [str(rows[0].id), str(rows[1].id)]
    assert body["results"][0]["agent_name"] == "Alpha"
    assert body["results"][0]["cost_usd"] == "0.500000"
    wide = {"date_from": (today() - datetime.timedelta(days=60)).isoformat()}
    assert client.get(URL, wide).json()["count"] == 3
    assert client.get(URL, {**wide, "agent": str(alpha.id)}).json()["count"] == 2
    assert client.get(URL, {"model": "claude-x"}).json()["count"] == 1
    assert client.get(URL, {"provider": "anthropic"}).json()["count"] == 1
    day = today().isoformat()
    only_today = client.get(URL, {"date_from": day, "date_to": day}).json()
    assert [r["id"] for r in only_today["results"]] == [str(rows[0].id)]
    assert client.get(URL, {**wide, "page_size": 1}).json()["next"] is not None


def test_csv_with_accept_header(tenant_a, tenant_b, as_role) -> None:
    *_, theirs = _rows(tenant_a, tenant_b)
    response = as_role(Role.VIEWER).get(URL, HTTP_ACCEPT="text/csv")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert "attachment;" in response["Content-Disposition"]
    table = list(csv.reader(io.StringIO(response.content.decode())))
    assert table[0] == COLUMNS
    assert len(table) == 3  # header + the two rows of the last 30 days, not a page
    by_name = {row[COLUMNS.index("agent_name")]: row for row in table[1:]}
    assert by_name["Alpha"][COLUMNS.index("cost_usd")] == "0.500000"
    assert "'=HYPERLINK(1)" in by_name  # a formula is quoted for spreadsheets
    assert "99.000000" not in response.content.decode()  # agency B's row is not there
    assert str(theirs.id) not in response.content.decode()
    same = as_role(Role.VIEWER).get(URL, {"format": "csv"})
    assert same.content == response.content


def test_empty_csv_has_the_header(tenant_a, as_role) -> None:
    response = as_role(Role.VIEWER).get(URL, HTTP_ACCEPT="text/csv")
    assert response.content.decode().splitlines() == [",".join(COLUMNS)]


def test_bad_filters_are_json_400s_even_for_csv(tenant_a, as_role) -> None:
    client = as_role(Role.VIEWER)
    assert "date_from" in fields_of(
        client.get(URL, {"date_from": "2026-02-01", "date_to": "2026-01-01"}), 422
    )
    assert "agent" in fields_of(client.get(URL, {"agent": "nope"}))
    response = client.get(URL, {"date_to": "soon"}, HTTP_ACCEPT="text/csv")
    assert response["Content-Type"] == "application/json"
    assert "date_to" in fields_of(response)


def test_options_describes_the_endpoint_in_json_even_for_csv(tenant_a, as_role) -> None:
    # Found by schemathesis: the CSV renderer took OPTIONS' description for rows (500).
    response = as_role(Role.VIEWER).options(f"{URL}?format=csv", HTTP_ACCEPT="text/csv")
    assert response.status_code == 200, response.content[:300]
    assert response["Content-Type"] == "application/json"
    assert response.json()["name"]


def test_another_agencys_agent_filter_finds_nothing(tenant_a, tenant_b, as_role) -> None:
    _rows(tenant_a, tenant_b)
    theirs = AgentFactory.create(agency=tenant_b.agency, site=tenant_b.site)
    UsageDailyFactory.create(agent=theirs)
    body = as_role(Role.ADMIN).get(URL, {"agent": str(theirs.id)}).json()
    assert body["count"] == 0
