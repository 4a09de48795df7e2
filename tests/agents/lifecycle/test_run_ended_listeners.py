"""Run-ended listeners (agents/lifecycle/listeners.py): the callables AGENTDESK_RUN_ENDED_LISTENERS
names are what runs as a run ends, in the listed order, inside the transaction that ends it (the
one that writes its terminal transition), whoever ends it: a cancel, the runtime's step, a
delivery's claim. One that raises rolls the end back.

On committed data (``live_db``): the end is a real transaction of its own. Each test listener
writes a row in the transaction it is called in; the row's ``xmin`` is the terminal transition
row's, and a failed end takes it back with the rest.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.test import override_settings

from agents.lifecycle import listeners
from agents.models import (
    AfterRunWork,
    Agent,
    Execution,
    ExecutionStatus,
    StateTransition,
    StopReason,
)
from agents.runtime import store
from agents.services import execution_cancel
from core import tenancy
from core.models import Event
from memory.models import Episode
from tests.agents.factories import AgentFactory, ExecutionFactory
from tests.agents.lifecycle import recording_listeners
from tests.agents.lifecycle.recording_listeners import ListenerFailed

HERE = "tests.agents.lifecycle.recording_listeners"
FIRST, SECOND, RAISING = f"{HERE}.first", f"{HERE}.second", f"{HERE}.raising"


@pytest.fixture
def calls() -> Iterator[list[dict[str, Any]]]:
    recording_listeners.CALLS.clear()
    yield recording_listeners.CALLS
    recording_listeners.CALLS.clear()


def _running_execution(owner: str) -> Execution:
    agent = AgentFactory.create()
    with tenancy.agency_context(agent.agency_id):
        return Execution.objects.create(
            agency_id=agent.agency_id,
            agent=agent,
            site_id=agent.site_id,
            trigger_type="manual",
            status=ExecutionStatus.RUNNING,
            lease_owner=owner,
            lease_expires_at=store.lease_deadline(),
        )


def _cancel(execution: Execution) -> Execution:
    with tenancy.agency_context(execution.agency_id):
        return execution_cancel(execution=execution)


def _ended_in(execution: Execution, status: str) -> str:
    """The id of the transaction that wrote the run's ``status`` transition."""
    with tenancy.agency_context(execution.agency_id), connection.cursor() as cursor:
        cursor.execute(
            "SELECT xmin::text FROM agents_statetransition WHERE execution_id = %s"
            " AND to_state = %s",
            [execution.id, status],
        )
        (xmin,) = cursor.fetchone()
    return str(xmin)


def _marks(execution: Execution) -> list[tuple[str, str]]:
    """(listener, id of the transaction that wrote its row) of each test listener's row."""
    with tenancy.agency_context(execution.agency_id), connection.cursor() as cursor:
        cursor.execute(
            "SELECT payload->>'listener', xmin::text FROM core_event"
            " WHERE event_type = %s AND source_entity_id = %s ORDER BY created_at, xmin::text",
            [recording_listeners.MARK, str(execution.id)],
        )
        return [(listener, str(xmin)) for listener, xmin in cursor.fetchall()]


def _reload(execution: Execution) -> Execution:
    with tenancy.agency_context(execution.agency_id):
        return Execution.objects.get(pk=execution.pk)


def test_a_cancel_calls_the_listeners_in_their_order_inside_its_transaction(
    live_db: None, calls: list[dict[str, Any]]
) -> None:
    execution = ExecutionFactory.create()
    with override_settings(AGENTDESK_RUN_ENDED_LISTENERS=[SECOND, FIRST]):
        cancelled = _cancel(execution)

    assert cancelled.status == ExecutionStatus.CANCELLED
    assert [call["listener"] for call in calls] == ["second", "first"]  # the setting's order
    ended_in = _ended_in(execution, ExecutionStatus.CANCELLED)
    for call in calls:
        assert call["execution"] == execution.id
        assert call["status"] == ExecutionStatus.CANCELLED
        assert call["from_status"] == ExecutionStatus.PENDING
        assert call["by_worker"] is False
        assert call["completed_at"] == cancelled.completed_at
        assert call["in_transaction"]
    assert sorted(_marks(execution)) == [("first", ended_in), ("second", ended_in)]


def test_the_runtimes_end_in_a_step_calls_them_in_the_steps_transaction(
    live_db: None, calls: list[dict[str, Any]]
) -> None:
    execution = _running_execution("worker-a")
    with (
        override_settings(AGENTDESK_RUN_ENDED_LISTENERS=[FIRST, SECOND]),
        store.step_transaction(execution, "worker-a") as tx,
    ):
        tx.finish(ExecutionStatus.COMPLETED, stop_reason=StopReason.FINAL_ANSWER, output="done")

    assert _reload(execution).status == ExecutionStatus.COMPLETED
    assert [call["listener"] for call in calls] == ["first", "second"]
    ended_in = _ended_in(execution, ExecutionStatus.COMPLETED)
    for call in calls:
        assert call["from_status"] == ExecutionStatus.RUNNING
        assert call["by_worker"] is True  # its own worker, in a step of the run
    assert sorted(_marks(execution)) == [("first", ended_in), ("second", ended_in)]


def test_a_delivery_that_ends_the_run_at_its_claim_is_not_its_workers_step(
    live_db: None, calls: list[dict[str, Any]]
) -> None:
    """(The run may have waited for a person: approvals' listener then cancels what waits.)"""
    execution = ExecutionFactory.create()
    with (
        override_settings(AGENTDESK_RUN_ENDED_LISTENERS=[FIRST]),
        tenancy.agency_context(execution.agency_id),
    ):
        claim = store.claim(execution.id, worker="worker-a")
        assert claim is not None
        claim.tx.finish(
            ExecutionStatus.CANCELLED, stop_reason=StopReason.CANCELLED, error="Switched off."
        )
        claim.tx.save()

    assert [(call["listener"], call["by_worker"]) for call in calls] == [("first", False)]
    assert _marks(execution) == [("first", _ended_in(execution, ExecutionStatus.CANCELLED))]


def test_a_listener_that_raises_rolls_a_cancel_back(
    live_db: None, calls: list[dict[str, Any]]
) -> None:
    execution = ExecutionFactory.create()
    with (
        override_settings(AGENTDESK_RUN_ENDED_LISTENERS=[FIRST, RAISING, SECOND]),
        pytest.raises(ListenerFailed),
    ):
        _cancel(execution)

    assert [call["listener"] for call in calls] == ["first", "raising"]  # none after it
    assert _marks(execution) == []  # what the listeners wrote went with the end
    with tenancy.agency_context(execution.agency_id):
        row = Execution.objects.get(pk=execution.pk)
        assert (row.status, row.completed_at) == (ExecutionStatus.PENDING, None)
        assert not StateTransition.objects.filter(execution_id=execution.id).exists()
        assert not AfterRunWork.objects.filter(execution_id=execution.id).exists()
        assert not Event.objects.filter(
            source_entity_id=str(execution.id), event_type__startswith="ai.execution."
        ).exists()
    # Nothing was left half-done: the same cancel goes through with listeners that work.
    with override_settings(AGENTDESK_RUN_ENDED_LISTENERS=[FIRST]):
        assert _cancel(execution).status == ExecutionStatus.CANCELLED


def test_a_listener_that_raises_rolls_the_runtimes_end_back(
    live_db: None, calls: list[dict[str, Any]]
) -> None:
    execution = _running_execution("worker-a")
    with (
        override_settings(AGENTDESK_RUN_ENDED_LISTENERS=[RAISING]),
        pytest.raises(ListenerFailed),
        store.step_transaction(execution, "worker-a") as tx,
    ):
        tx.finish(ExecutionStatus.COMPLETED, stop_reason=StopReason.FINAL_ANSWER, output="done")

    row = _reload(execution)
    assert (row.status, row.lease_owner, row.completed_at) == (
        ExecutionStatus.RUNNING,
        "worker-a",
        None,
    )
    with tenancy.agency_context(execution.agency_id):
        # The agent's stats, updated earlier in the same transaction, rolled back with it.
        assert Agent.objects.get(pk=execution.agent_id).total_runs == 0
        assert not StateTransition.objects.filter(execution_id=execution.id).exists()
    assert _marks(execution) == []
    assert connection.connection.info.transaction_status.name == "IDLE"


def test_the_listener_list_is_the_settings(live_db: None) -> None:
    """Memory's episode is one of the default listeners: a list without it records none."""
    without, default = ExecutionFactory.create(), ExecutionFactory.create()
    with override_settings(AGENTDESK_RUN_ENDED_LISTENERS=[]):
        assert listeners.listeners() == ()
        _cancel(without)
    _cancel(default)

    with tenancy.agency_context(without.agency_id):
        assert not Episode.objects.filter(execution_id=without.id).exists()
    with tenancy.agency_context(default.agency_id):
        assert Episode.objects.filter(execution_id=default.id).exists()
    with override_settings(AGENTDESK_RUN_ENDED_LISTENERS=[SECOND, FIRST]):
        assert listeners.listeners() == (recording_listeners.second, recording_listeners.first)


def test_a_listener_that_is_not_callable_is_refused() -> None:
    with (
        override_settings(AGENTDESK_RUN_ENDED_LISTENERS=[f"{HERE}.NOT_CALLABLE"]),
        pytest.raises(ImproperlyConfigured, match="NOT_CALLABLE is not callable"),
    ):
        listeners.listeners()
