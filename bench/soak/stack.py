"""The platform the soak runs against: ``manage.py up`` (embedded PostgreSQL and Redis, the demo
model and agency, web, worker and beat), as a developer runs it, on a data folder of the soak's
choosing, its output in a log file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[2]
# The soak measures the platform, not the API's per-client limits: its clients share the demo
# logins (README "Throttling": 120 requests a minute per key or user).
UNTHROTTLED = {
    "AGENTDESK_API_THROTTLE_BURST": "1000000/min",
    "AGENTDESK_API_THROTTLE_SUSTAINED": "100000000/hour",
}


class Stack:
    def __init__(
        self, *, data_dir: Path, port: int, log: Path, env: dict[str, str] | None = None
    ) -> None:
        self.data_dir = data_dir
        self.extra_env = env or {}
        self.port = port
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        # As `make run` starts it: not on the test settings, database and log level that
        # importing `bench` sets for the other benchmarks.
        dropped = {"DATABASE_URL", "REDIS_URL", "AGENTDESK_TEST_DB", "LOG_LEVEL"}
        env = {k: v for k, v in os.environ.items() if k not in dropped}
        env.update(
            AGENTDESK_DATA_DIR=str(self.data_dir),
            DJANGO_SETTINGS_MODULE="config.settings.dev",
            # Its own metrics files: /metrics sums every process writing to the directory.
            PROMETHEUS_MULTIPROC_DIR=str(self.data_dir / "prometheus-soak"),
            PYTHONUNBUFFERED="1",
            **UNTHROTTLED,
        )
        env.update(self.extra_env)
        return env

    def start(self, timeout: float = 300) -> Stack:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "up", "--port", str(self.port)],
            cwd=ROOT,
            env=self.env(),
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"manage.py up exited:\n{self.output()[-3000:]}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=5).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(1)
        raise RuntimeError(f"the platform did not answer in {timeout} s:\n{self.output()[-3000:]}")

    def pids(self) -> dict[str, int]:
        """web (uvicorn), worker (the Celery worker: one process, a thread pool) and beat."""
        assert self.process is not None
        found = {}
        for child in psutil.Process(self.process.pid).children():
            line = " ".join(child.cmdline())
            for name, marker in (("web", "uvicorn"), ("worker", " worker"), ("beat", " beat")):
                if marker in line:
                    found[name] = child.pid
        return found

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(120)
        except subprocess.TimeoutExpired:
            for child in psutil.Process(self.process.pid).children(recursive=True):
                child.kill()
            self.process.kill()
            self.process.wait(10)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def lines(self) -> int:
        """How many lines the platform has logged: :meth:`web_lines` from here on."""
        return len(self.output().splitlines())

    def web_lines(self, since: int = 0) -> list[str]:
        lines = self.output().splitlines()[since:]
        return [line for line in lines if line.lstrip().startswith("web |")]
