"""Websocket clients against the real ASGI server, and runs whose steps the test writes itself
(through the runtime's own store, so each is committed and broadcast as in production)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.test import Client
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from agents.models import Execution, ExecutionStatus, StepType
from agents.runtime import store
from core import realtime, tenancy
from core.models import User
from tests.processes import AsgiServer


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
    )


@dataclass
class Received:
    messages: list[dict[str, Any]] = field(default_factory=list)
    close_code: int | None = None


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
            store.record_transition(execution, ExecutionStatus.PENDING, reason="test", created=True)
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
