"""Agent stats at the end of a run (seed 004's update_agent_stats): the average response time is
the exact mean however large the history, and only completed and failed runs count — a cancelled
or timed-out run changes nothing, and last_error is the last failure's."""

from __future__ import annotations

import datetime
from decimal import ROUND_HALF_UP, Decimal

import pytest
from django.utils import timezone

from agents import lifecycle
from agents.models import Agent, Execution, ExecutionStatus, StopReason
from agents.services import execution_cancel
from core import tenancy
from tests.agents.factories import AgentFactory

pytestmark = pytest.mark.django_db

STOP_REASONS: dict[str, str] = {
    ExecutionStatus.COMPLETED: StopReason.FINAL_ANSWER,
    ExecutionStatus.FAILED: StopReason.ERROR,
    ExecutionStatus.TIMED_OUT: StopReason.TIMEOUT,
    ExecutionStatus.CANCELLED: StopReason.CANCELLED,
}


def _finish(
    agent: Agent, status: str, *, ran_ms: int = 1500, error: str = "", tokens: int = 0
) -> Execution:
    """A run of ``agent`` that ran ``ran_ms`` and ends with ``status``, through the lifecycle's
    end of a run, in one agency transaction."""
    with tenancy.agency_context(agent.agency_id):
        execution = Execution.objects.create(
            agency_id=agent.agency_id,
            agent=agent,
            site_id=agent.site_id,
            trigger_type="manual",
            status=ExecutionStatus.RUNNING,
            started_at=timezone.now() - datetime.timedelta(milliseconds=ran_ms),
            tokens_total=tokens,
        )
        lifecycle.finish_execution(
            execution, status=status, stop_reason=STOP_REASONS[status], error=error
        )
        execution.save()
    return execution


def _reload(agent: Agent) -> Agent:
    with tenancy.agency_context(agent.agency_id):
        return Agent.objects.get(pk=agent.pk)


def _rounded_mean(total_ms: int, runs: int) -> int:
    return int((Decimal(total_ms) / Decimal(runs)).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def test_a_long_history_neither_overflows_nor_skews_the_average() -> None:
    """40,000 runs of 60 s: avg x runs is past 2^31, which int4 arithmetic could not hold."""
    agent = AgentFactory.create()
    runs, average = 40_000, 60_000
    with tenancy.agency_context(agent.agency_id):
        Agent.objects.filter(pk=agent.pk).update(
            total_runs=runs,
            successful_runs=runs,
            avg_response_time_ms=average,
            total_response_time_ms=runs * average,
        )
    execution = _finish(agent, ExecutionStatus.COMPLETED, ran_ms=90_000)
    assert execution.duration_ms is not None

    agent = _reload(agent)
    assert agent.total_runs == runs + 1
    assert agent.successful_runs == runs + 1
    assert agent.total_response_time_ms == runs * average + execution.duration_ms
    assert agent.avg_response_time_ms == _rounded_mean(
        runs * average + execution.duration_ms, runs + 1
    )
    assert agent.avg_response_time_ms == 60_001  # 60 000 + ~30 000 / 40 001, rounded


def test_the_average_is_the_rounded_mean_after_every_run() -> None:
    """A running average rounded (or truncated) at each run drifts from the mean."""
    agent = AgentFactory.create()
    durations: list[int] = []
    for i in range(30):
        execution = _finish(agent, ExecutionStatus.COMPLETED, ran_ms=800 + (i * 7919) % 4000)
        assert execution.duration_ms is not None
        durations.append(execution.duration_ms)
        current = _reload(agent)
        assert current.avg_response_time_ms == _rounded_mean(sum(durations), len(durations)), i
    assert current.total_runs == 30
    assert current.total_response_time_ms == sum(durations)


def test_only_completed_and_failed_runs_count_and_last_error_is_the_last_failure() -> None:
    agent = AgentFactory.create()
    failed = _finish(
        agent, ExecutionStatus.FAILED, error="The model provider refused the key.", tokens=40
    )
    after_failure = _reload(agent)
    assert (after_failure.total_runs, after_failure.successful_runs) == (1, 0)
    assert after_failure.failed_runs == 1
    assert after_failure.last_error == "The model provider refused the key."
    assert after_failure.last_run_at == failed.completed_at

    # A timed-out run and a cancelled one (through the cancel service) leave the stats alone.
    _finish(agent, ExecutionStatus.TIMED_OUT, error="Reached timeout_seconds (120).", tokens=70)
    with tenancy.agency_context(agent.agency_id):
        pending = Execution.objects.create(
            agency_id=agent.agency_id, agent=agent, site_id=agent.site_id, trigger_type="manual"
        )
    with tenancy.agency_context(agent.agency_id):
        cancelled = execution_cancel(execution=pending, reason="Not needed any more.")
    assert cancelled.status == ExecutionStatus.CANCELLED

    unchanged = _reload(agent)
    stats = (
        "total_runs", "successful_runs", "failed_runs", "total_tokens_used",
        "avg_response_time_ms", "total_response_time_ms", "last_run_at", "last_error",
    )  # fmt: skip
    assert [getattr(unchanged, f) for f in stats] == [getattr(after_failure, f) for f in stats]

    # A success keeps the last failure's error.
    _finish(agent, ExecutionStatus.COMPLETED, tokens=5)
    after_success = _reload(agent)
    assert (after_success.total_runs, after_success.successful_runs) == (2, 1)
    assert after_success.failed_runs == 1
    assert after_success.total_tokens_used == 45
    assert after_success.last_error == "The model provider refused the key."
