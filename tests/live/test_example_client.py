"""The documented example client (docs/examples/watch_execution.py) against the real server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from core.models import Role
from tests.agents.factories import AgentFactory
from tests.api.conftest import new_key
from tests.live.helpers import ScriptedRun
from tests.processes import AsgiServer

pytestmark = pytest.mark.slow
SCRIPT = Path(__file__).resolve().parents[2] / "docs" / "examples" / "watch_execution.py"


def test_the_example_client_prints_a_finished_run_and_exits(
    asgi_server: AsgiServer, live_db: None
) -> None:
    run = ScriptedRun.start(AgentFactory.create(name="Docs agent"))
    run.tool_step("crm_get_contact", {"email": "ada@example.com"}, {"contact": {"id": 1}})
    run.finish()
    key = new_key(run.agent.agency, Role.VIEWER)
    done = subprocess.run(
        [sys.executable, str(SCRIPT), asgi_server.url, str(run.execution.id), "--key", key],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "[completed] Docs agent" in done.stdout
    assert "act crm_get_contact" in done.stdout
    assert "running -> completed (final_answer)" in done.stdout


def test_the_example_client_stops_on_a_refusal(asgi_server: AsgiServer, live_db: None) -> None:
    run = ScriptedRun.start(AgentFactory.create())
    other_key = new_key(AgentFactory.create().agency)
    done = subprocess.run(
        [sys.executable, str(SCRIPT), asgi_server.url, str(run.execution.id), "--key", other_key],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert "no such execution" in done.stderr
