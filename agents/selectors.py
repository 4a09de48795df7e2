"""Reads of an agent's runs for its pages: how many, by status, counted from the runs themselves
(the list of its executions counts the same rows)."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count

from agents.models import Agent, Execution, ExecutionStatus


@dataclass(frozen=True)
class RunCounts:
    """An agent's runs: every execution of it (a run a person started, an event, a schedule or
    another agent's delegation did, whatever its state), by status in the statuses' order."""

    by_status: dict[ExecutionStatus, int]

    @property
    def total(self) -> int:
        return sum(self.by_status.values())


def agent_run_counts(*, agent: Agent) -> RunCounts:
    """One query; filters on the agent's agency explicitly."""
    rows = dict(
        Execution.objects.filter(agency_id=agent.agency_id, agent_id=agent.pk)
        .order_by()
        .values_list("status")
        .annotate(runs=Count("id"))
        .values_list("status", "runs")
    )
    return RunCounts(
        by_status={status: rows[status] for status in ExecutionStatus if rows.get(status)}
    )
