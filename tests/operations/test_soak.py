"""The soak's one-minute version (bench/soak/): ``manage.py up`` on a data folder of its own,
under Locust's mixed load (staff browsing with their pages' sockets open, approvers deciding, API
clients starting and polling runs, signed webhooks, 50 watchers on running runs). Nothing timed
is asserted: only that no answer was a 5xx and that no stalled pool had to be replaced."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def test_a_minute_of_mixed_load_answers_no_5xx_and_replaces_no_pool(tmp_path: Path) -> None:
    out = tmp_path / "soak"
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env["AGENTDESK_DATA_DIR"] = str(tmp_path / "data")  # servers of its own, stopped after
    command = [
        sys.executable, "-m", "bench.soak", "--minutes", "1", "--warmup-seconds", "20",
        "--out", str(out),
    ]  # fmt: skip
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    report = json.loads((out / "report.json").read_text())
    served = {row["name"]: row["requests"] for row in report["requests"]}

    # Every kind of user did some of its work (a loaded machine may leave a tour unfinished).
    for name in (
        "runs (list)", "inbox", "/api/v1/agents/[id]/execute/", "/api/v1/webhooks/[id]/",
        "/ws/agency/ (handshake)", "/ws/executions/[id]/ (watcher) (handshake)",
    ):  # fmt: skip
        assert served.get(name, 0) > 0, (name, served)
    assert report["websockets"].get("ws /ws/executions/[id]/ (watcher) messages", 0) > 0
    assert sum(report["runs"].values()) > 0

    # No 5xx: not to a client, not in the access log, not logged by Django for a client gone.
    log = (out / "up.log").read_text(errors="replace")
    assert report["server_error_count"] == 0, (report["server_errors"], _errors(log))
    replaced = report["pool_replacements"]
    assert replaced["logged"] == 0, replaced["lines"]
    assert all(value == 0 for value in replaced["metric"].values()), replaced


def _errors(log: str) -> str:
    """The web server's error lines with their tracebacks, for the failure message."""
    web = [line for line in log.splitlines() if line.lstrip().startswith("web |")]
    picked = []
    for i, line in enumerate(web):
        if "/healthz" in line:  # the start's, before the worker is up: not counted either
            continue
        if "ERROR django.request" in line or "Exception in ASGI application" in line:
            end = next((j for j in range(i + 1, len(web)) if "INFO:" in web[j]), len(web))
            picked.append("\n".join(web[i:end]))
    return "\n---\n".join(picked[:3])
