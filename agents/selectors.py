"""Reads of an agent's runs for its pages: how many, by status, and what they used, counted from
the runs themselves (the list of its executions counts the same rows)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.db.models import Count, Sum

from agents.models import Agent, Execution, ExecutionPurpose, ExecutionStatus


@dataclass(frozen=True)
class RunCounts:
    """An agent's runs: every execution of it (a run a person started, an event, a schedule or
    another agent's delegation did, whatever its state), by status in the statuses' order."""

    by_status: dict[ExecutionStatus, int]
    tokens: int = 0
    cost_usd: Decimal = Decimal(0)
    tool_calls: int = 0

    @property
    def total(self) -> int:
        return sum(self.by_status.values())


def agent_run_counts(*, agent: Agent) -> RunCounts:
    """Its runs (an experiment's evaluation runs are none of them). One query; filters on the
    agent's agency explicitly."""
    rows = {
        row["status"]: row
        for row in Execution.objects.filter(
            agency_id=agent.agency_id, agent_id=agent.pk, purpose=ExecutionPurpose.RUN
        )
        .order_by()
        .values("status")
        .annotate(
            runs=Count("id"),
            tokens=Sum("tokens_total"),
            cost=Sum("cost_usd"),
            calls=Sum("tool_call_count"),
        )
    }
    return RunCounts(
        by_status={status: rows[status]["runs"] for status in ExecutionStatus if status in rows},
        tokens=sum(row["tokens"] for row in rows.values()),
        cost_usd=sum((row["cost"] for row in rows.values()), Decimal(0)),
        tool_calls=sum(row["calls"] for row in rows.values()),
    )
