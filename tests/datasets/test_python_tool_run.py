"""execute_python in a run on a real Celery worker: a script stopped by the sandbox is a tool
error the model sees, the run goes on, and the next script's table comes back."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from agents.models import Agent, ExecutionStatus
from agents.services import execution_create
from core import tenancy
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import by_turn, text_reply, tool_call_reply
from tests.datasets.helpers import upload
from tests.processes import Worker, wait_for
from tools.models import ToolCall
from tools.sandbox.bubblewrap import BubblewrapExecutor

pytestmark = pytest.mark.slow

ANALYSIS = (
    "import pandas as pd\n"
    "df = pd.read_csv('/data/sales.csv')\n"
    "result = df.groupby('region', as_index=False)['amount'].sum()\n"
)


def test_a_run_goes_on_after_the_sandbox_stops_a_script(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    reason = BubblewrapExecutor().unavailable()
    if reason:
        pytest.skip(f"no bubblewrap sandbox on this machine: {reason}")
    agent = make_agent(allowed_tools=["execute_python"])
    upload(agent.agency)
    hog = {"code": "x = bytearray(64 * 1024**3)", "datasets": ["sales"]}
    fake_llm_server.set_responder(
        by_turn(
            tool_call_reply("execute_python", hog),
            tool_call_reply("execute_python", {"code": ANALYSIS, "datasets": ["sales"]}),
            text_reply("North and south sell the most."),
        ),
        key=agent.llm_model,
    )
    with tenancy.agency_context(agent.agency_id):
        started = execution_create(agent=agent, input="Which regions sell the most?")
    assert started is not None
    execution = wait_for(started, timeout=180)

    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert execution.output == "North and south sell the most."
    with tenancy.agency_context(agent.agency_id):
        calls = list(ToolCall.objects.filter(execution=execution).order_by("created_at"))
    assert [c.status for c in calls] == ["failed", "completed"]
    failed, completed = calls[0].output, calls[1].output
    assert failed is not None
    assert completed is not None
    error = failed["error"]
    assert error["code"] == "memory_limit"
    assert "cpu_seconds" in error["details"]  # the script's cost, on its call
    assert completed["rows"] == [["east", 3.0], ["north", 17.75], ["south", 20.0]]
    assert completed["cpu_seconds"] > 0
    # The model was told why the first script stopped.
    told = json.dumps(fake_llm_server.requests_for(agent.llm_model)[1].tool_results)
    assert "memory_limit" in told
    assert celery_worker.process is not None
    assert celery_worker.process.poll() is None  # the worker is unharmed
