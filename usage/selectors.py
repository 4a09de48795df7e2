"""Reads of usage: totals per day, per agent and per model over a date range, and today's spend
against the daily budget."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, TypedDict

from django.db.models import Count, QuerySet, Sum
from django.db.models.functions import Coalesce

from agents.models import TERMINAL_STATUSES, Agent, Execution, ExecutionPurpose
from core.models import Agency
from usage.models import Budget, UsageDaily, UsagePurpose, today

COUNTERS = (
    "agent_runs",
    "llm_calls",
    "tool_calls",
    "tokens_input",
    "tokens_output",
    "tokens_cache_read",
    "tokens_cache_write",
)


class UsageTotals(TypedDict):
    agent_runs: int
    llm_calls: int
    tool_calls: int
    tokens_input: int
    tokens_output: int
    tokens_cache_read: int
    tokens_cache_write: int
    cost_usd: Decimal


def _sums() -> dict[str, Any]:
    sums: dict[str, Any] = {name: Coalesce(Sum(name), 0) for name in COUNTERS}
    sums["cost_usd"] = Coalesce(Sum("cost_usd"), Decimal(0))
    return sums


def _totals(row: Mapping[str, Any]) -> UsageTotals:
    return UsageTotals(
        **{name: int(row[name]) for name in COUNTERS},  # type: ignore[typeddict-item]
        cost_usd=row["cost_usd"],
    )


def usage_summary(
    *,
    rows: QuerySet[UsageDaily],
    date_from: datetime.date,
    date_to: datetime.date,
    agent_id: uuid.UUID | None = None,
    site_id: uuid.UUID | None = None,
) -> dict[str, Any]:
    """Totals of ``rows`` (already scoped to the caller's agency) from ``date_from`` to
    ``date_to`` inclusive, overall and grouped by day, agent and model."""
    rows = rows.filter(date__gte=date_from, date__lte=date_to)
    if agent_id is not None:
        rows = rows.filter(agent_id=agent_id)
    if site_id is not None:
        rows = rows.filter(site_id=site_id)
    by_day = [
        {"date": row["date"], **_totals(row)}
        for row in rows.values("date").annotate(**_sums()).order_by("date")
    ]
    agents: list[dict[str, Any]] = [
        {"agent_id": row["agent_id"], **_totals(row)}
        for row in rows.values("agent_id").annotate(**_sums()).order_by("-cost_usd", "agent_id")
    ]
    # Usage outlives deleted agents (no foreign key): their name is simply unknown.
    names = dict(
        Agent.objects.filter(pk__in=[a["agent_id"] for a in agents if a["agent_id"]]).values_list(
            "pk", "name"
        )
    )
    for entry in agents:
        entry["agent_name"] = names.get(entry["agent_id"])
    by_model = [
        {"provider": row["provider"], "model": row["model"], **_totals(row)}
        for row in rows.values("provider", "model")
        .annotate(**_sums())
        .order_by("-cost_usd", "provider", "model")
    ]
    return {
        "date_from": date_from,
        "date_to": date_to,
        "totals": _totals(rows.aggregate(**_sums())),
        "by_day": by_day,
        "by_agent": agents,
        "by_model": by_model,
    }


@dataclass(frozen=True)
class TodaySpend:
    date: datetime.date
    spent_usd: Decimal
    reserved_usd: Decimal
    limit_usd: Decimal | None  # None: no daily budget configured

    @property
    def percent(self) -> int | None:
        """Spent and reserved, as a share of the limit (0-100)."""
        if not self.limit_usd:
            return None
        share = (self.spent_usd + self.reserved_usd) / self.limit_usd * 100
        return max(0, min(100, round(share)))

    @property
    def remaining_usd(self) -> Decimal | None:
        if self.limit_usd is None:
            return None
        return max(Decimal(0), self.limit_usd - self.spent_usd - self.reserved_usd)


def spend_today(*, agency: Agency) -> TodaySpend:
    """Today's spend against the daily budget (the staff home's and the budget list's). Today's
    budget row is created by the runtime at the first model call of the day, from the latest
    earlier limit: before that, that limit is the one that will apply, and the spend is what
    usage recorded (nothing, usually). Filters on ``agency`` explicitly."""
    day = today()
    budget = Budget.objects.filter(agency=agency, date__lte=day).order_by("-date").first()
    if budget is not None and budget.date == day:
        return TodaySpend(
            date=day,
            spent_usd=budget.used_usd,
            reserved_usd=budget.reserved_usd,
            limit_usd=budget.limit_usd,
        )
    spent = UsageDaily.objects.filter(agency=agency, date=day).aggregate(
        total=Coalesce(Sum("cost_usd"), Decimal(0))
    )["total"]
    return TodaySpend(
        date=day,
        spent_usd=spent,
        reserved_usd=Decimal(0),
        limit_usd=budget.limit_usd if budget is not None else None,
    )


def run_rows(rows: QuerySet[UsageDaily]) -> QuerySet[UsageDaily]:
    """The rows of runs' own model calls, without what after-run work called (memory extraction,
    quality judging): a run's end adds its own cost (Execution.cost_usd) to its day's run row, so
    these rows' cost is their runs' cost, figure for figure."""
    return rows.filter(purpose=UsagePurpose.RUN)


@dataclass(frozen=True)
class AgentSpendToday:
    ended_runs: int  # runs that ended today
    ended_usd: Decimal  # their own cost (the sum of their Execution.cost_usd)
    going_runs: int  # runs not ended yet (running, or waiting for a person, another agent, a time)
    going_usd: Decimal  # what they have spent so far
    after_runs_usd: Decimal  # model calls after runs: memory extraction, quality judging
    evaluations_usd: Decimal = Decimal(0)  # its experiments' runs (evals/): none of its runs

    @property
    def runs_usd(self) -> Decimal:
        """The runs' own cost, as each run's page, the list of runs and daily usage say it."""
        return self.ended_usd + self.going_usd

    @property
    def spent_usd(self) -> Decimal:
        """All of it, as the daily budget counts it."""
        return self.runs_usd + self.after_runs_usd + self.evaluations_usd


def agent_spend_today(*, agent: Agent) -> AgentSpendToday:
    """What ``agent`` spent today, as the daily budget counts it (at each model call): its runs
    that ended today (a run's usage row is written when it ends), its runs still going, with what
    they have spent so far (kept on their own rows, step by step), and apart from the runs, what
    memory extraction and quality judging called after them. Without the second, a run waiting
    for an answer had cost money and the agent's day still said 0; without the third apart, the
    runs' figure was above the cost of the runs it counted. Its experiments' runs (evaluation
    runs) are none of its runs: those that ended today are apart too, those going not counted.
    Filters on the agent's agency explicitly."""
    rows = UsageDaily.objects.filter(agency_id=agent.agency_id, agent_id=agent.pk, date=today())
    ended = run_rows(rows).aggregate(
        runs=Coalesce(Sum("agent_runs"), 0), cost=Coalesce(Sum("cost_usd"), Decimal(0))
    )
    after = rows.exclude(purpose__in=(UsagePurpose.RUN, UsagePurpose.EVALUATION)).aggregate(
        cost=Coalesce(Sum("cost_usd"), Decimal(0))
    )
    evaluations = rows.filter(purpose=UsagePurpose.EVALUATION).aggregate(
        cost=Coalesce(Sum("cost_usd"), Decimal(0))
    )
    going = (
        Execution.objects.filter(
            agency_id=agent.agency_id, agent_id=agent.pk, purpose=ExecutionPurpose.RUN
        )
        .exclude(status__in=TERMINAL_STATUSES)
        .aggregate(runs=Count("id"), cost=Coalesce(Sum("cost_usd"), Decimal(0)))
    )
    return AgentSpendToday(
        ended_runs=ended["runs"],
        ended_usd=ended["cost"],
        going_runs=going["runs"],
        going_usd=going["cost"],
        after_runs_usd=after["cost"],
        evaluations_usd=evaluations["cost"],
    )
