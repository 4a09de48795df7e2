"""`manage.py up`'s worker (and docker-compose's, the same `celery -A config worker` without -Q)
consumes every queue of config/queues.py: no kind of work waits where nobody listens."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from config import queues
from config.celery_app import app
from devkit.management.commands.up import Command

ROOT = Path(__file__).resolve().parents[2]


def _active_queues(name: str, process: subprocess.Popen[bytes], log: Path) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 180  # a worker's start on a loaded machine (tests/processes.py)
    while time.monotonic() < deadline:
        assert process.poll() is None, log.read_text(errors="replace")[-3000:]
        if "ready." in log.read_text(errors="replace"):
            replies = app.control.inspect(destination=[name], timeout=5).active_queues() or {}
            if name in replies:
                return list(replies[name])
        time.sleep(0.2)
    raise AssertionError(f"the worker did not answer:\n{log.read_text(errors='replace')[-3000:]}")


@pytest.mark.slow
def test_ups_worker_consumes_every_queue(django_db_setup: None, tmp_path: Path) -> None:
    children = Command()._children({"host": "127.0.0.1", "port": 1, "concurrency": 2})
    argv = next(child.argv for child in children if child.name == "worker")
    assert "-Q" not in argv
    assert "--queues" not in argv
    name = f"up-queues-{uuid.uuid4().hex[:8]}@{socket.gethostname()}"
    log = tmp_path / "worker.log"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test", "PYTHONUNBUFFERED": "1"}
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    process = subprocess.Popen(
        [*argv, "-n", name], cwd=ROOT, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT
    )
    try:
        consumed = _active_queues(name, process, log)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
    assert sorted(queue["name"] for queue in consumed) == sorted(queues.NAMES)
