"""A cron tick starts one run, however often its Celery message is delivered.

With acks_late a worker that dies after run_scheduled committed, before its ack, leaves the
message to be delivered again with the same task id; that delivery must not start a second run.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable

import pytest
from django.db import connection, transaction

from agents.models import Agent, Execution, SkipReason, TriggerLog, TriggerOutcome
from agents.schedules import agent_schedule_sync
from agents.tasks import run_scheduled
from core import tenancy
from tests.agents.factories import AgentFactory
from tests.processes import Worker


def _tick(agent: Agent, task_id: str) -> str | None:
    """One delivery of the beat entry's message, as a worker runs it."""
    result: str | None = run_scheduled.apply(
        args=[str(agent.id)], kwargs={"agency_id": str(agent.agency_id)}, task_id=task_id
    ).get()
    return result


def _runs_and_logs(agent: Agent) -> tuple[list[Execution], list[TriggerLog]]:
    with tenancy.agency_context(agent.agency_id):
        runs = list(Execution.objects.filter(agent=agent))
        logs = list(TriggerLog.objects.filter(agent=agent).order_by("triggered_at"))
    return runs, logs


@pytest.mark.django_db
def test_a_tick_delivered_again_starts_no_second_run_and_logs_a_duplicate() -> None:
    agent = AgentFactory.create(trigger_schedule="0 9 * * *")
    tick = str(uuid.uuid4())
    first = _tick(agent, tick)
    again = _tick(agent, tick)
    assert first is not None
    assert again is None
    runs, logs = _runs_and_logs(agent)
    assert [str(run.id) for run in runs] == [first]
    assert runs[0].trigger_data == {"schedule": "0 9 * * *", "tick_id": tick}
    assert [(log.outcome, log.skip_reason) for log in logs] == [
        (TriggerOutcome.INVOKED, ""),
        (TriggerOutcome.SKIPPED, SkipReason.DUPLICATE),
    ]
    assert first in logs[1].skip_detail  # the repeat names the run the tick started


@pytest.mark.django_db
def test_each_tick_starts_its_own_run() -> None:
    agent = AgentFactory.create(trigger_schedule="*/5 * * * *")
    other = AgentFactory.create(agency=agent.agency, trigger_schedule="*/5 * * * *")
    first, second = _tick(agent, str(uuid.uuid4())), _tick(agent, str(uuid.uuid4()))
    assert first is not None
    assert second is not None
    assert first != second
    # A tick id is unique per agent: another agent's message with the same id (not something
    # beat sends, but the key says "this agent's tick") still runs that agent.
    tick = str(uuid.uuid4())
    assert _tick(agent, tick) is not None
    assert _tick(other, tick) is not None
    assert len(_runs_and_logs(agent)[0]) == 3


@pytest.mark.django_db
def test_a_skipped_tick_delivered_again_is_evaluated_again_and_starts_nothing() -> None:
    agent = AgentFactory.create(trigger_schedule="0 9 * * *", is_active=False)
    tick = str(uuid.uuid4())
    assert _tick(agent, tick) is None
    assert _tick(agent, tick) is None
    runs, logs = _runs_and_logs(agent)
    assert runs == []
    assert {log.skip_reason for log in logs} == {SkipReason.AGENT_INACTIVE}


def test_two_deliveries_of_a_tick_at_once_start_one_run(live_db: None) -> None:
    """The second delivery waits for the first one's commit (on the agent's run-limit lock, or on
    the unique index's uncommitted entry), then finds the tick taken: no read-then-write race."""
    agent = AgentFactory.create(trigger_schedule="0 9 * * *")
    tick = str(uuid.uuid4())
    outcome: list[str | None] = []

    def second_delivery() -> None:
        try:
            outcome.append(_tick(agent, tick))
        finally:
            connection.close()

    with transaction.atomic():  # the first delivery, not committed yet
        first = _tick(agent, tick)
        thread = threading.Thread(target=second_delivery)
        thread.start()
        _wait_until_blocked_on_a_lock()
    thread.join(30)
    assert first is not None
    assert outcome == [None]
    runs, logs = _runs_and_logs(agent)
    assert [str(run.id) for run in runs] == [first]
    assert [log.skip_reason for log in logs] == ["", SkipReason.DUPLICATE]


def _wait_until_blocked_on_a_lock() -> None:
    # Another session of this test database waiting on a lock: the second delivery, inside its
    # transaction while the first one's is open. Polled only to make sure that interleaving
    # happened; nothing is asserted about how long it takes.
    for _ in range(300):
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'"
            )
            if cursor.fetchone()[0]:
                return
        time.sleep(0.05)
    pytest.fail("the second delivery never waited on the first one's uncommitted tick")


@pytest.mark.slow
def test_beat_sends_an_agents_tick_and_a_worker_starts_its_run(
    make_agent: Callable[..., Agent], celery_worker: Worker
) -> None:
    """The tick is sent as beat sends it (celery.beat.Scheduler.apply_async: the registered
    task's apply_async with the database entry's args and kwargs) to a real worker. Celery's
    argument check refused every tick before it was sent until TenantTask turned it off."""
    from agents.models import Execution, TriggerType
    from agents.tasks import run_scheduled

    agent = make_agent(trigger_schedule="*/15 * * * *")
    with tenancy.agency_context(agent.agency_id):
        entry = agent_schedule_sync(agent)
    assert entry is not None

    result = run_scheduled.apply_async(json.loads(entry.args), json.loads(entry.kwargs))

    assert result is not None
    deadline = time.monotonic() + 60
    while True:
        with tenancy.agency_context(agent.agency_id):
            runs = list(Execution.objects.filter(agent=agent))
        if runs:
            break
        assert time.monotonic() < deadline, "the tick started no run"
        time.sleep(0.2)
    assert [run.trigger_type for run in runs] == [TriggerType.SCHEDULE]
