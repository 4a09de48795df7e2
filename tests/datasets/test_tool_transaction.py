"""A tool call whose work is long and needs no database (a sandboxed script here) runs with its
step's transaction released (core.tenancy.released): on a real worker, while the script runs,
no connection of the test database is idle in a transaction (which would pin a PgBouncer server
connection and hold back vacuum for up to AGENTDESK_SANDBOX_WALL_SECONDS); the call's result and
step still commit together."""

from __future__ import annotations

import time
from collections.abc import Callable

import psutil
import psycopg
import pytest
from django.conf import settings

from agents.models import Agent, ExecutionStatus
from agents.services import execution_create
from core import tenancy
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import by_turn, text_reply, tool_call_reply
from tests.conftest import _maintenance_conninfo
from tests.datasets.helpers import upload
from tests.processes import Worker, wait_for
from tools.models import ToolCall
from tools.sandbox.bubblewrap import BubblewrapExecutor

pytestmark = pytest.mark.slow

SLOW_SCRIPT = "import time\ntime.sleep(4)\nresult = [{'rows': 1}]\n"
# A connection left idle in a transaction since before the script started (other tasks of the
# worker open and end short transactions of their own meanwhile: those are not counted).
HELD_ACROSS_THE_SCRIPT = (
    "SELECT count(*) FROM pg_stat_activity WHERE datname = %s"
    " AND state LIKE 'idle in transaction%%' AND state_change < %s"
)


def _sandbox_running(worker: Worker) -> bool:
    assert worker.process is not None
    try:
        children = psutil.Process(worker.process.pid).children(recursive=True)
    except psutil.Error:
        return False
    return any(child.name() == "bwrap" for child in children)


def test_a_script_runs_with_no_connection_idle_in_a_transaction(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    reason = BubblewrapExecutor().unavailable()
    if reason:
        pytest.skip(f"no bubblewrap sandbox on this machine: {reason}")
    agent = make_agent(allowed_tools=["execute_python"])
    upload(agent.agency)
    fake_llm_server.set_responder(
        by_turn(
            tool_call_reply("execute_python", {"code": SLOW_SCRIPT, "datasets": ["sales"]}),
            text_reply("Done."),
        ),
        key=agent.llm_model,
    )
    with tenancy.agency_context(agent.agency_id):
        started = execution_create(agent=agent, input="Take your time.")
    assert started is not None

    samples: list[int] = []
    database = settings.DATABASES["default"]["NAME"]
    deadline = time.monotonic() + 120
    script_seen: object = None  # the server's clock when the script was first seen running
    with psycopg.connect(_maintenance_conninfo(), autocommit=True) as watcher:
        while time.monotonic() < deadline:  # until the script has run and ended
            if _sandbox_running(celery_worker):
                if script_seen is None:
                    clock = watcher.execute("SELECT clock_timestamp()").fetchone()
                    script_seen = clock[0] if clock else None
                    continue
                row = watcher.execute(HELD_ACROSS_THE_SCRIPT, [database, script_seen]).fetchone()
                samples.append(row[0] if row else -1)
            elif samples:
                break
            time.sleep(0.05)
    execution = wait_for(started, timeout=120)

    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert samples, "the script was never seen running"
    assert set(samples) == {0}
    with tenancy.agency_context(agent.agency_id):
        (call,) = ToolCall.objects.filter(execution=execution)
    assert call.status == "completed"
    assert call.output is not None
    assert call.output["rows"] == [[1]]
