"""A finished run's quality score from its signals (memory.learning.quality): a failed tool, a
denied or edited approval, a failed run each lower it; each signal's part is kept."""

from __future__ import annotations

import uuid

import pytest
from django.utils import timezone

from agents.models import Agent, ExecutionStatus
from approvals.models import ApprovalStatus
from core import tenancy
from memory.learning import quality
from memory.learning.models import RunQuality
from memory.learning.services import learn_after_run
from tests.agents.factories import AgentFactory
from tests.approvals.factories import ApprovalFactory
from tests.memory.learning.helpers import finished_run
from tools.models import ToolCall, ToolCallStatus

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent() -> Agent:
    return AgentFactory.create(learning_enabled=False)


def scored(execution_id: uuid.UUID, agent: Agent) -> RunQuality:
    with tenancy.agency_context(agent.agency_id):
        return RunQuality.objects.get(execution_id=execution_id)


def test_a_clean_completed_run_scores_full_marks(agent: Agent) -> None:
    execution = finished_run(agent)

    assert learn_after_run(execution.id, agency_id=agent.agency_id) == "scored 1.00"

    row = scored(execution.id, agent)
    assert row.score == 1.0
    assert set(row.signals) == {"goal", "tools", "corrections", "human"}  # no workflow, no judge
    assert sum(s["contribution"] for s in row.signals.values()) == pytest.approx(1.0, abs=1e-3)
    assert row.threshold == pytest.approx(0.8)


def test_a_failed_tool_lowers_the_score(agent: Agent) -> None:
    clean = finished_run(agent)
    failing = finished_run(
        agent,
        calls=[
            ("crm_search_contacts", {"query": "Ada"}, ToolCallStatus.FAILED),
            ("crm_search_contacts", {"query": "Ada Lovelace"}, ToolCallStatus.COMPLETED),
        ],
    )
    learn_after_run(clean.id, agency_id=agent.agency_id)
    learn_after_run(failing.id, agency_id=agent.agency_id)

    row = scored(failing.id, agent)
    assert row.signals["tools"]["value"] == 0.5
    assert row.signals["tools"]["detail"] == "1 of 2 tool calls failed"
    assert row.score < scored(clean.id, agent).score
    assert row.score == pytest.approx(1 - 0.5 * 0.20 / 0.85, abs=1e-3)


def test_a_denied_approval_lowers_the_score_more_than_an_edited_one(agent: Agent) -> None:
    denied, edited = finished_run(agent), finished_run(agent)
    with tenancy.agency_context(agent.agency_id):
        ApprovalFactory.create(
            tool_call=ToolCall.objects.filter(execution=denied).first(),
            status=ApprovalStatus.DENIED,
            decided_at=timezone.now(),
        )
        ApprovalFactory.create(
            tool_call=ToolCall.objects.filter(execution=edited).first(),
            status=ApprovalStatus.APPROVED,
            decided_at=timezone.now(),
            edited_arguments={"query": "Ada L."},
        )

    for execution in (denied, edited):
        learn_after_run(execution.id, agency_id=agent.agency_id)

    denied_row, edited_row = scored(denied.id, agent), scored(edited.id, agent)
    assert denied_row.signals["human"]["value"] == 0.5
    assert edited_row.signals["human"]["value"] == 0.75
    assert denied_row.score < edited_row.score < 1.0


def test_a_failed_run_stays_below_the_threshold(agent: Agent) -> None:
    execution = finished_run(agent, status=ExecutionStatus.FAILED)

    learn_after_run(execution.id, agency_id=agent.agency_id)

    row = scored(execution.id, agent)
    assert row.signals["goal"]["value"] == 0.0
    assert row.score < row.threshold
    assert not row.is_good


def test_a_run_is_scored_once_and_a_running_one_not_at_all(agent: Agent) -> None:
    execution = finished_run(agent)
    running = finished_run(agent, status=ExecutionStatus.RUNNING)

    learn_after_run(execution.id, agency_id=agent.agency_id)

    assert learn_after_run(execution.id, agency_id=agent.agency_id) == "scored already"
    assert learn_after_run(running.id, agency_id=agent.agency_id) == "missing"
    with tenancy.agency_context(agent.agency_id):
        assert RunQuality.objects.filter(execution_id=execution.id).count() == 1
        assert not RunQuality.objects.filter(execution_id=running.id).exists()


def test_combine_shares_out_the_weight_of_missing_signals() -> None:
    score, signals = quality.combine({"goal": (1.0, ""), "tools": (0.0, "")})

    assert score == pytest.approx(0.4 / 0.6, abs=1e-3)
    assert signals["goal"]["weight"] == pytest.approx(0.6667, abs=1e-3)
    assert signals["tools"]["contribution"] == 0.0
