"""End-to-end fixtures, a plugin of tests/conftest.py so that every test directory has them:
a real Celery worker process on this test run's queue and database, the fake provider server on
loopback, and agents wired to it."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from agents import lifecycle
from agents.models import Agent, Execution, ExecutionStatus, LLMProvider
from agents.services import execution_cancel
from core import tenancy
from devkit import embedded
from devkit.fake_server import FakeProviderServer
from tests.agents.factories import AgentFactory
from tests.factories import AgencyFactory, SiteFactory

ROOT = Path(__file__).resolve().parents[1]
TERMINAL = {"completed", "failed", "cancelled", "timed_out"}
# Worker logs of this test run (or benchmark) go here; earlier runs' are removed when it starts.
LOGS = ROOT / ".data" / "worker-logs"


def _log_dir() -> Path:
    here = LOGS / str(os.getpid())
    if not here.exists():
        for old in LOGS.glob("*"):
            if old.name.isdigit() and not _alive(int(old.name)):
                shutil.rmtree(old, ignore_errors=True)
        here.mkdir(parents=True, exist_ok=True)
    return here


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Worker:
    """A real `celery worker` subprocess; can be killed and started again. ``plain``: started
    as production starts one (`celery -A config worker`: the pool and concurrency of the
    settings, mingle and gossip on), not trimmed for the suite."""

    def __init__(
        self, *, queue: str | None = None, concurrency: int = 8, plain: bool = False, **env: str
    ) -> None:
        self.queue = queue
        self.concurrency = concurrency
        self.plain = plain
        self.extra_env = env
        self.process: subprocess.Popen[bytes] | None = None
        self.log = _log_dir() / f"worker-{uuid.uuid4().hex[:6]}.log"
        # Its node name, as remote control commands address it (add_consumer, ...).
        self.name = f"test-{uuid.uuid4().hex[:8]}@{socket.gethostname()}"

    def start(self, **env: str) -> Worker:
        environment = dict(os.environ)
        environment.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # set while a test browser is open
        environment.update(
            DJANGO_SETTINGS_MODULE="config.settings.test",
            AGENTDESK_LEASE_SECONDS="3",
            AGENTDESK_LLM_TIMEOUT_SECONDS="10",
            AGENTDESK_LLM_MAX_RETRIES="1",
            # Tests edit tools and rules between runs and expect the worker to see it.
            AGENTDESK_CATALOGUE_CACHE_SECONDS="0",
            PYTHONUNBUFFERED="1",
        )
        environment.update(self.extra_env)
        environment.update(env)
        self.log.parent.mkdir(exist_ok=True)
        trimmed = [
            "--pool", "threads", "--concurrency", str(self.concurrency),
            "--without-mingle", "--without-gossip",
        ]  # fmt: skip
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "--loglevel", "INFO",
             *([] if self.plain else trimmed),
             "-n", self.name,
             *(["-Q", self.queue] if self.queue else [])],
            cwd=ROOT, env=environment, stdout=self.log.open("ab"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        self._wait_ready()
        return self

    # Minutes, not seconds: on a loaded 2-core machine (two xdist processes starting workers,
    # servers and browsers at once) a worker's imports alone took over 60 s.
    def _wait_ready(self, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"worker exited early:\n{self.log.read_text()[-3000:]}")
            if "ready." in self.log.read_text(errors="replace"):
                return
            time.sleep(0.1)
        raise RuntimeError(f"worker not ready:\n{self.log.read_text()[-3000:]}")

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()

    def wait_exit(self, timeout: float = 30) -> int | None:
        assert self.process is not None
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture(scope="session")
def fake_llm_server() -> Iterator[FakeProviderServer]:
    with FakeProviderServer() as server:
        yield server


@pytest.fixture(scope="session")
def celery_worker(django_db_setup: None) -> Iterator[Worker]:
    worker = Worker().start()
    yield worker
    worker.stop()


@pytest.fixture
def make_agent(live_db: None, fake_llm_server: FakeProviderServer) -> Callable[..., Agent]:
    """An active agent of a new agency whose provider is the fake server; its model name is
    unique, so the fake server serves this test's script to it alone."""

    def make(kind: str = "openai", **fields: Any) -> Agent:
        agency = AgencyFactory.create()
        site = SiteFactory.create(agency=agency)
        with tenancy.agency_context(agency.id):
            provider = LLMProvider(
                agency=agency,
                provider_name=kind,
                api_endpoint={
                    "anthropic": fake_llm_server.anthropic_base_url,
                    "google": fake_llm_server.google_base_url,
                }.get(kind, fake_llm_server.openai_base_url),
            )
            provider.set_api_key("test-key-not-real")
            provider.save()
        defaults: dict[str, Any] = {
            "allowed_tools": ["*"],
            "llm_provider": kind,
            "llm_model": f"fake-{uuid.uuid4().hex[:10]}",
        }
        defaults.update(fields)
        return AgentFactory.create(agency=agency, site=site, **defaults)

    return make


def pending_execution(agent: Agent, *, input_text: str) -> Execution:
    """A manual run of ``agent``, pending, its task not sent: the caller runs it in its own
    thread (``agents.runtime.loop.run_execution``), with no worker in between."""
    with tenancy.agency_context(agent.agency_id):
        execution = Execution.objects.create(
            agency_id=agent.agency_id, agent=agent, site_id=agent.site_id,
            trigger_type="manual", input=input_text,
        )  # fmt: skip
        lifecycle.record_transition(execution, ExecutionStatus.PENDING, reason="test", created=True)
        execution.save()
    return execution


def cancel_from_elsewhere(execution: Execution) -> None:
    """Cancel the running ``execution`` as an API client would, on a connection of its own (a
    thread), while the caller's thread is inside the run."""

    def cancel() -> None:
        try:
            with tenancy.agency_context(execution.agency_id):
                running = Execution.objects.get(pk=execution.pk)
                assert running.status == ExecutionStatus.RUNNING  # so the worker is only asked
                execution_cancel(execution=running)
        finally:
            connection.close()

    thread = threading.Thread(target=cancel)
    thread.start()
    thread.join()


def wait_for(execution: Execution, statuses: set[str] = TERMINAL, timeout: float = 45) -> Execution:
    deadline = time.monotonic() + timeout
    while True:
        with tenancy.agency_context(execution.agency_id):
            current = Execution.objects.get(pk=execution.pk)
        if current.status in statuses:
            return current
        if time.monotonic() > deadline:
            raise AssertionError(f"execution still {current.status} after {timeout} s")
        time.sleep(0.05)


@pytest.fixture
def settings_queue() -> str:
    return str(settings.CELERY_TASK_DEFAULT_QUEUE)


class AsgiServer:
    """The real ASGI application under uvicorn (HTTP and websockets), on this test run's
    database and Redis, as `manage.py up` runs it."""

    def __init__(self, **env: str) -> None:
        self.port = embedded.free_port()
        self.extra_env = env
        self.process: subprocess.Popen[bytes] | None = None
        self.log = _log_dir() / f"asgi-{uuid.uuid4().hex[:6]}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def start(self) -> AsgiServer:

        environment = dict(os.environ)
        environment.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # set while a test browser is open
        environment.update(DJANGO_SETTINGS_MODULE="config.settings.test", PYTHONUNBUFFERED="1")
        environment.update(self.extra_env)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "config.asgi:application", "--host", "127.0.0.1",
             "--port", str(self.port), "--log-level", "warning",
             "--ws-per-message-deflate", "false"],  # as `manage.py up` runs it
            cwd=ROOT, env=environment, stdout=self.log.open("ab"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        deadline = time.monotonic() + 180  # as a worker's start, on a loaded machine
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"ASGI server exited early:\n{self.output()[-3000:]}")
            if embedded.port_open(self.port):
                return self
            time.sleep(0.1)
        raise RuntimeError(f"ASGI server not listening:\n{self.output()[-3000:]}")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture(scope="session")
def asgi_server(django_db_setup: None) -> Iterator[AsgiServer]:
    server = AsgiServer().start()
    yield server
    server.stop()
