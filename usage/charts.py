"""Daily usage as charts: the series of the last days (zero-filled) and the Chart.js data that
unfold's chart components draw (``unfold/components/chart/{bar,line}.html``, Chart.js served by
unfold as a static file). Used by the staff home and above the usage changelists.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import QuerySet, Sum
from django.db.models.functions import Coalesce

from usage.models import UsageDaily, today

CHART_DAYS = 14


@dataclass(frozen=True)
class DayUsage:
    date: datetime.date
    cost_usd: Decimal
    tokens_input: int
    tokens_output: int
    agent_runs: int


@dataclass(frozen=True)
class UsageCharts:
    """Chart.js ``data`` objects as JSON text, and the totals they add up to."""

    date_from: datetime.date
    date_to: datetime.date
    cost: str
    tokens: str
    runs: str
    total_cost_usd: Decimal
    total_tokens: int
    total_runs: int


def daily_series(
    *, rows: QuerySet[UsageDaily], end: datetime.date | None = None, days: int = CHART_DAYS
) -> list[DayUsage]:
    """One entry per day of the ``days`` days ending ``end`` (today), zeros where nothing was
    used. ``rows`` is already scoped to the caller's agency (and filters)."""
    end = end or today()
    start = end - datetime.timedelta(days=days - 1)
    sums = (
        rows.filter(date__gte=start, date__lte=end)
        .order_by()
        .values("date")
        .annotate(
            cost=Coalesce(Sum("cost_usd"), Decimal(0)),
            tokens_in=Coalesce(Sum("tokens_input"), 0),
            tokens_out=Coalesce(Sum("tokens_output"), 0),
            runs=Coalesce(Sum("agent_runs"), 0),
        )
    )
    by_date = {row["date"]: row for row in sums}
    series = []
    for offset in range(days):
        day = start + datetime.timedelta(days=offset)
        row = by_date.get(day)
        series.append(
            DayUsage(
                date=day,
                cost_usd=row["cost"] if row else Decimal(0),
                tokens_input=int(row["tokens_in"]) if row else 0,
                tokens_output=int(row["tokens_out"]) if row else 0,
                agent_runs=int(row["runs"]) if row else 0,
            )
        )
    return series


def _dataset(label: str, values: list[Any], color: str, **extra: Any) -> dict[str, Any]:
    return {
        "label": label,
        "data": values,
        "backgroundColor": color,
        "borderColor": color,
        **extra,
    }


def _chart(labels: list[str], *datasets: dict[str, Any]) -> str:
    # The first dataset carries unfold's axis switches (its app.js reads them from any dataset).
    first = {**datasets[0], "displayYAxis": True, "maxTicksXLimit": 7}
    return json.dumps({"labels": labels, "datasets": [first, *datasets[1:]]})


def usage_charts(series: list[DayUsage]) -> UsageCharts:
    labels = [f"{day.date:%b} {day.date.day}" for day in series]
    primary = "var(--color-primary-600)"
    light = "var(--color-primary-300)"
    cost = _chart(
        labels,
        _dataset("Cost (USD)", [round(float(day.cost_usd), 4) for day in series], primary),
    )
    tokens = _chart(
        labels,
        _dataset("Input tokens", [day.tokens_input for day in series], primary),
        _dataset("Output tokens", [day.tokens_output for day in series], light),
    )
    runs = _chart(labels, _dataset("Runs ended", [day.agent_runs for day in series], primary))
    return UsageCharts(
        date_from=series[0].date,
        date_to=series[-1].date,
        cost=cost,
        tokens=tokens,
        runs=runs,
        total_cost_usd=sum((day.cost_usd for day in series), Decimal(0)),
        total_tokens=sum(day.tokens_input + day.tokens_output for day in series),
        total_runs=sum(day.agent_runs for day in series),
    )
