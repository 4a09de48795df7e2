"""protocols.runs' async wait (an MCP call, an A2A task) wakes on the run's status change that the
lifecycle broadcasts to the agency's live group: with every timed look pushed out to an hour, a
run cancelled after the wait's first look is seen as cancelled at once (without the wake-up the
wait sleeps its hour, and the guard of two minutes fails the test)."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable

import pytest
from django.db import connection

from agents.models import Agent, Execution, ExecutionStatus
from agents.services import execution_cancel
from core import tenancy
from protocols import runs
from tests.processes import pending_execution

HOUR = 3600.0


def test_the_async_wait_wakes_on_the_runs_status_change(
    make_agent: Callable[..., Agent], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("_WAKE_FALLBACK_S", "_POLL_FIRST_S", "_POLL_MAX_S"):
        monkeypatch.setattr(runs, name, HOUR)  # no look but the first and those an event causes
    agent = make_agent()
    execution = pending_execution(agent, input_text="Hi")  # no worker: it stays pending
    looked = threading.Event()
    real_outcome = runs.run_outcome

    def first_look_then_cancel(*, execution_id: uuid.UUID | str) -> runs.RunOutcome | None:
        outcome = real_outcome(execution_id=execution_id)
        looked.set()
        return outcome

    def cancel() -> None:
        looked.wait(120)
        try:
            with tenancy.agency_context(agent.agency_id):
                execution_cancel(execution=Execution.objects.get(pk=execution.pk))
        finally:
            connection.close()

    monkeypatch.setattr(runs, "run_outcome", first_look_then_cancel)
    thread = threading.Thread(target=cancel)
    thread.start()
    try:
        wait = runs.run_wait_async(
            agency_id=agent.agency_id, execution_id=execution.id, timeout_s=HOUR
        )
        outcome = asyncio.run(asyncio.wait_for(wait, 120))  # a guard, not a measure
    finally:
        looked.set()
        thread.join()

    assert outcome is not None
    assert outcome.status == ExecutionStatus.CANCELLED


@pytest.mark.parametrize(
    ("status", "input_request", "settled"),
    [
        (ExecutionStatus.WAITING_APPROVAL, {}, True),
        (ExecutionStatus.WAITING_INPUT, {"kind": "question"}, True),
        # The `wait` tool's timer and a provider's rate limit wait for no person: waiting helps.
        (ExecutionStatus.WAITING_INPUT, {"kind": "timer"}, False),
        (ExecutionStatus.WAITING_INPUT, {"kind": "provider_rate_limit"}, False),
        (ExecutionStatus.WAITING_AGENT, {}, False),
        (ExecutionStatus.COMPLETED, {}, True),
    ],
)
def test_a_run_parked_on_a_clock_is_not_settled_for_a_caller_waiting_on_it(
    status: str, input_request: dict[str, str], settled: bool
) -> None:
    outcome = runs.RunOutcome(
        execution_id=uuid.uuid4(), agent_id=uuid.uuid4(), status=status, input_request=input_request
    )
    assert outcome.settled is settled
