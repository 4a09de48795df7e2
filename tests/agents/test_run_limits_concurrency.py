"""max_runs_per_hour holds under concurrency: two triggers at once, on two connections, start
one run when one is left, whatever the interleaving.

Deterministic: trigger A starts its run and keeps its transaction open; trigger B starts on
another thread (its own connection). The test waits until B has either finished or is waiting
for a lock, and only then commits A. Without serialisation B counts no run (A's is not
committed) and starts a second one before A commits; with it B waits for A and then sees A's
run."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

from django.db import connection, connections

from agents.models import Agent, Execution, TriggerLog
from agents.services import execution_create
from core import tenancy
from tests.agents.factories import AgentFactory

WAIT_LIMIT = 30.0  # seconds before the test gives up on B reaching either state


def _trigger(agent: Agent, queue: str) -> Execution | None:
    return execution_create(agent=agent, input="Go.", queue=queue)


def _backend_waits_for_a_lock(pid: int) -> bool:
    # Backend states are read once per transaction unless the snapshot is cleared.
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid])
        row = cursor.fetchone()
    return row is not None and row[0] == "Lock"


def test_two_triggers_at_once_start_one_run_when_one_is_left(live_db: None) -> None:
    agent = AgentFactory.create(max_runs_per_hour=1)
    queue = f"nobody-listens-{uuid.uuid4().hex[:8]}"  # the runs are not what is tested
    b_pid: list[int] = []
    b_result: list[Any] = []

    def trigger_b() -> None:
        try:
            with tenancy.agency_context(agent.agency_id):
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_backend_pid()")
                    b_pid.append(cursor.fetchone()[0])
                b_result.append(_trigger(agent, queue))
        except Exception as exc:  # reported by the main thread
            b_result.append(exc)
        finally:
            connections.close_all()  # this thread's connection

    b = threading.Thread(target=trigger_b)
    with tenancy.agency_context(agent.agency_id):
        a_result = _trigger(agent, queue)
        assert a_result is not None
        b.start()
        deadline = time.monotonic() + WAIT_LIMIT
        while True:
            if not b.is_alive() or (b_pid and _backend_waits_for_a_lock(b_pid[0])):
                break
            assert time.monotonic() < deadline, "trigger B neither finished nor waited"
            time.sleep(0.02)
    # A has committed.
    b.join(WAIT_LIMIT)
    assert not b.is_alive()
    assert not isinstance(b_result[0], Exception), b_result[0]
    with tenancy.agency_context(agent.agency_id):
        runs = Execution.objects.filter(agent=agent).count()
        skips = list(
            TriggerLog.objects.filter(agent=agent, outcome="skipped").values_list(
                "skip_reason", "skip_detail"
            )
        )
    assert runs == 1
    assert b_result == [None]
    assert skips == [("rate_limited", "max_runs_per_hour (1) reached")]
