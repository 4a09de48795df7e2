"""A worker started without pool options gets the documented pool: threads, not prefork."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.slow


def test_a_plain_celery_worker_runs_executions_on_64_threads() -> None:
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "PYTHONUNBUFFERED": "1",
    }
    environment.pop("CELERY_WORKER_CONCURRENCY", None)
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--without-mingle",
         "--without-gossip", "-Q", f"pool-check-{uuid.uuid4().hex[:8]}", "-n",
         f"pool-check-{uuid.uuid4().hex[:8]}@%h"],
        cwd=ROOT, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert worker.stdout is not None
    banner = []
    try:
        for line in worker.stdout:  # the start-up banner, then the worker's log
            banner.append(line)
            if "concurrency:" in line or len(banner) > 200:
                break
    finally:
        worker.terminate()
        worker.wait(30)
    assert any("concurrency: 64 (thread)" in line for line in banner), "".join(banner)
