"""AgentDesk's agents as A2A agents (/a2a/agents/<id>/, protocols/a2a/) driven by the A2A
project's own SDK client (a2a-sdk, spec 1.0) against the real ASGI application under uvicorn, a
real Celery worker and the fake provider server: the agent card, a message that completes with
the run's output as its artefact, the same over a stream, get, cancel of a running task, a run
waiting for an approval (input-required), another agency's key, and bad requests as JSON-RPC
errors."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.client.card_resolver import A2ACardResolver
from a2a.client.errors import AgentCardResolutionError
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import TaskNotFoundError, UnsupportedOperationError
from django.db import connection

from agents.models import Agent, Execution, ExecutionStatus
from core import tenancy
from core.models import Role as MemberRole
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import RecordedRequest, Step, by_turn, text_reply, tool_call_reply
from protocols.a2a.cards import INPUTS_EXTENSION
from tests.api.conftest import new_key
from tests.processes import AsgiServer, Worker, wait_for

pytestmark = pytest.mark.slow
WAIT_LIMIT = 20  # AGENTDESK_A2A_WAIT_SECONDS of this module's server
APPROVE_EMAIL = {"type": "require_approval", "tools": ["email_*"], "description": "human"}
CARD = ".well-known/agent-card.json"
BAD_KEYS = 3  # failed keys an address may send a day (only the throttle test sends any)


@pytest.fixture(scope="module")
def server(django_db_setup: None) -> Iterator[AsgiServer]:
    started = AsgiServer(
        AGENTDESK_A2A_WAIT_SECONDS=str(WAIT_LIMIT),
        AGENTDESK_API_BAD_CREDENTIALS_RATE=f"{BAD_KEYS}/day",
    ).start()
    yield started
    started.stop()


def _base(server: AsgiServer, agent_id: Any) -> str:
    return f"{server.url}/a2a/agents/{agent_id}/"


def _a2a[T](
    server: AsgiServer,
    agent: Agent,
    key: str,
    work: Callable[[Any], Awaitable[T]],
    *,
    streaming: bool = False,
    polling: bool = False,
) -> T:
    """``work(client)`` with the SDK's client made from the agent's card, ``key`` in its header."""

    async def session() -> T:
        headers = {"Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(headers=headers, timeout=90) as http:
            config = ClientConfig(httpx_client=http, streaming=streaming, polling=polling)
            client = await ClientFactory(config).create_from_url(_base(server, agent.id))
            return await work(client)

    return asyncio.run(session())


def _request(text: str, *parts: Part) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(
            message_id=uuid.uuid4().hex,
            role=Role.ROLE_USER,
            parts=[Part(text=text), *parts],
        )
    )


def _send(server: AsgiServer, agent: Agent, key: str, text: str, **config: bool) -> list[Any]:
    """Every event of one SendMessage (a single task when not streaming)."""

    async def send(client: Any) -> list[Any]:
        return [event async for event in client.send_message(_request(text))]

    return _a2a(server, agent, key, send, **config)


async def _drain(events: Any) -> list[Any]:
    return [event async for event in events]


def _get(server: AsgiServer, agent: Agent, key: str, task_id: str) -> Task:
    return _a2a(server, agent, key, lambda c: c.get_task(GetTaskRequest(id=task_id)))


def _cancel(server: AsgiServer, agent: Agent, key: str, task_id: str) -> Task:
    return _a2a(server, agent, key, lambda c: c.cancel_task(CancelTaskRequest(id=task_id)))


def _rpc(
    server: AsgiServer, agent_id: Any, key: str | None, body: Any, version: str = "1.0"
) -> httpx.Response:
    headers = {"A2A-Version": version}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    content = body if isinstance(body, str) else None
    return httpx.post(
        _base(server, agent_id),
        headers=headers,
        content=content,
        json=None if content is not None else body,
        timeout=60,
    )


def _status(execution_id: Any, agency_id: Any) -> Execution:
    with tenancy.agency_context(agency_id):
        return Execution.objects.get(pk=execution_id)


def test_the_card_names_the_agent_its_skill_endpoint_and_the_api_key_scheme(
    server: AsgiServer, make_agent: Callable[..., Agent]
) -> None:
    agent = make_agent("openai", description="Answers questions about renewals.")
    key = new_key(agent.agency)

    async def fetch() -> Any:
        headers = {"Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(headers=headers) as http:
            return await A2ACardResolver(http, _base(server, agent.id)).get_agent_card()

    card = asyncio.run(fetch())
    assert card.name == agent.name
    assert card.description == "Answers questions about renewals."
    assert [skill.id for skill in card.skills] == [agent.slug]
    assert card.capabilities.streaming
    assert [(i.url, i.protocol_binding, i.protocol_version) for i in card.supported_interfaces] == [
        (_base(server, agent.id), "JSONRPC", "1.0"),
        (_base(server, agent.id), "JSONRPC", "0.3"),
    ]
    scheme = card.security_schemes["agentdeskApiKey"].http_auth_security_scheme
    assert scheme.scheme == "Bearer"
    assert list(card.security_requirements[0].schemes) == ["agentdeskApiKey"]
    # No key, no card: the agents of an agency are not public.
    refused = httpx.get(f"{_base(server, agent.id)}{CARD}")
    assert refused.status_code == 401
    assert refused.json()["code"] == "not_authenticated"


INPUTS = {
    "type": "object",
    "properties": {"client": {"type": "string"}, "year": {"type": "integer"}},
    "required": ["client"],
}


def test_declared_inputs_are_on_the_card_and_a_data_part_must_match_them(
    server: AsgiServer,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = make_agent("openai", input_schema=INPUTS)
    fake_llm_server.set_responder(by_turn(text_reply("Ada renewed.")), key=agent.llm_model)
    key = new_key(agent.agency)

    card = _rpc_card(server, agent, key)
    [extension] = card["capabilities"]["extensions"]
    assert extension["uri"] == INPUTS_EXTENSION
    assert extension["required"] is True  # an input is required
    assert extension["params"]["schema"] == INPUTS

    def send(*parts: dict[str, Any]) -> dict[str, Any]:
        message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": list(parts)}
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
        return _rpc(server, agent.id, key, body).json()

    refused = send({"text": "Renewals?"}, {"data": {"year": 2025}})["error"]
    assert (refused["code"], refused["message"]) == (
        -32602,  # invalid params
        "The data does not match the agent's inputs: 'client' is a required property",
    )
    with tenancy.agency_context(agent.agency_id):
        assert not Execution.objects.filter(agent=agent).exists()

    # The data part alone is enough: the inputs are the run's data, its model sees them.
    task = send({"data": {"client": "Ada", "year": 2025}})["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    execution = _status(task["id"], agent.agency_id)
    assert execution.trigger_data == {"client": "Ada", "year": 2025, "_via": "a2a"}


def _rpc_card(server: AsgiServer, agent: Agent, key: str) -> dict[str, Any]:
    answer = httpx.get(
        f"{_base(server, agent.id)}{CARD}", headers={"Authorization": f"Bearer {key}"}
    )
    assert answer.status_code == 200
    return answer.json()


def test_a_message_completes_with_the_runs_output_as_its_artefact(
    server: AsgiServer,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = make_agent("openai")
    fake_llm_server.set_responder(
        by_turn(text_reply("The renewal is due on 1 March.")), key=agent.llm_model
    )
    key = new_key(agent.agency)

    [event] = _send(server, agent, key, "When is the renewal due?")
    task = event.task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    # (its text part first; a data part follows when the run has a structured result)
    assert task.artifacts[0].parts[0].text == "The renewal is due on 1 March."
    assert task.history[0].parts[0].text == "When is the renewal due?"
    execution = _status(task.id, agent.agency_id)  # the task is the execution
    assert execution.agent_id == agent.id
    assert execution.input == "When is the renewal due?"
    assert execution.trigger_data["_via"] == "a2a"

    fetched = _get(server, agent, key, task.id)
    assert fetched.status.state == TaskState.TASK_STATE_COMPLETED
    assert fetched.artifacts[0].parts[0].text == "The renewal is due on 1 March."
    # A 0.3 client's method names on the same endpoint, answered in 0.3's shapes.
    old = _rpc(server, agent.id, key, {"jsonrpc": "2.0", "id": 7, "method": "tasks/get",
                                       "params": {"id": task.id}}, version="0.3")  # fmt: skip
    assert old.json()["result"]["status"]["state"] == "completed"
    assert old.json()["result"]["kind"] == "task"
    # An ended task has nothing to follow.
    with pytest.raises(UnsupportedOperationError):
        _a2a(server, agent, key, lambda c: _drain(c.subscribe(SubscribeToTaskRequest(id=task.id))),
             streaming=True)  # fmt: skip


def test_a_streamed_message_sends_the_task_its_artefact_and_its_final_state(
    server: AsgiServer,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = make_agent("openai")
    fake_llm_server.set_responder(by_turn(text_reply("Streamed answer.")), key=agent.llm_model)
    key = new_key(agent.agency)

    events = _send(server, agent, key, "Answer over a stream.", streaming=True)
    kinds = [event.WhichOneof("payload") for event in events]
    assert kinds[0] == "task"
    assert "artifact_update" in kinds
    artifact = next(e.artifact_update for e in events if e.HasField("artifact_update"))
    assert artifact.artifact.parts[0].text == "Streamed answer."
    assert kinds[-1] == "status_update"
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    assert _status(events[0].task.id, agent.agency_id).status == ExecutionStatus.COMPLETED


def _held_first_reply(release: threading.Event) -> Callable[[RecordedRequest], Step]:
    """The first model call answers (a tool call) only once ``release`` is set."""
    first = tool_call_reply("crm_get_contact", {"email": "ada@example.com"})
    rest = by_turn(first, text_reply("Done."))

    def respond(request: RecordedRequest) -> Step:
        if request.assistant_turns == 0:
            release.wait(8)  # below the test worker's model-call timeout (10 s)
        return rest(request)

    return respond


def _release_once_cancel_requested(
    execution_id: str, agency_id: Any, release: threading.Event
) -> threading.Thread:
    def watch() -> None:
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                if _status(execution_id, agency_id).cancel_requested_at is not None:
                    break
                time.sleep(0.05)
        finally:
            release.set()
            connection.close()

    thread = threading.Thread(target=watch)
    thread.start()
    return thread


def test_cancel_of_a_running_task_goes_through_the_cancel_service(
    server: AsgiServer,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = make_agent("openai", allowed_tools=["crm_get_contact"])
    release = threading.Event()
    fake_llm_server.set_responder(_held_first_reply(release), key=agent.llm_model)
    key = new_key(agent.agency)

    [event] = _send(server, agent, key, "Look Ada up.", polling=True)  # return at once
    assert event.task.status.state in (
        TaskState.TASK_STATE_SUBMITTED,
        TaskState.TASK_STATE_WORKING,
    )
    task_id = event.task.id
    wait_for(_status(task_id, agent.agency_id), {ExecutionStatus.RUNNING})
    watcher = _release_once_cancel_requested(task_id, agent.agency_id, release)

    async def follow_then_cancel(client: Any) -> tuple[Task, list[Any]]:
        """A subscriber follows the running task while the cancel is asked for."""
        events: list[Any] = []
        following_started = asyncio.Event()

        async def follow() -> None:
            async for event in client.subscribe(SubscribeToTaskRequest(id=task_id)):
                events.append(event)
                following_started.set()

        following = asyncio.create_task(follow())
        await asyncio.wait_for(following_started.wait(), 30)
        cancelled = await client.cancel_task(CancelTaskRequest(id=task_id))
        await asyncio.wait_for(following, 30)
        return cancelled, events

    try:
        cancelled, followed = _a2a(server, agent, key, follow_then_cancel, streaming=True)
    finally:
        release.set()
        watcher.join()
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert followed[0].task.status.state == TaskState.TASK_STATE_WORKING
    assert followed[-1].status_update.status.state == TaskState.TASK_STATE_CANCELED
    execution = _status(task_id, agent.agency_id)
    assert execution.status == ExecutionStatus.CANCELLED
    assert execution.stop_reason == "cancelled"
    assert execution.cancel_requested_at is not None  # asked, and its worker stopped it
    assert _get(server, agent, key, task_id).status.state == TaskState.TASK_STATE_CANCELED


def test_a_run_waiting_for_an_approval_is_input_required_and_hidden_from_other_agencies(
    server: AsgiServer,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = make_agent("openai", allowed_tools=["email_*"], constraints=[APPROVE_EMAIL])
    fake_llm_server.set_responder(
        by_turn(
            tool_call_reply("email_send", {"to": ["c@example.com"], "subject": "S", "body": "B"}),
            text_reply("Sent."),
        ),
        key=agent.llm_model,
    )
    key = new_key(agent.agency)
    other = make_agent("openai")
    other_key = new_key(other.agency)

    [event] = _send(server, agent, key, "Write to the client.")
    task = event.task
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert "approver" in task.status.message.parts[0].text
    assert _status(task.id, agent.agency_id).status == ExecutionStatus.WAITING_APPROVAL

    # Another agency's key, at its own agent's endpoint: the task does not exist, exactly as
    # a made-up id does not, for reading and for cancelling.
    for task_id in (task.id, str(uuid.uuid4())):
        with pytest.raises(TaskNotFoundError):
            _get(server, other, other_key, task_id)
        with pytest.raises(TaskNotFoundError):
            _cancel(server, other, other_key, task_id)
    # ...and at this agent's endpoint and card: refused as a made-up agent is.
    made_up = uuid.uuid4()
    for agent_id in (agent.id, made_up):
        card = httpx.get(
            f"{_base(server, agent_id)}{CARD}", headers={"Authorization": f"Bearer {other_key}"}
        )
        assert (card.status_code, card.json()) == (
            404,
            {"message": "No such agent.", "code": "not_found", "extra": {}},
        )
        body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task.id}}
        assert _rpc(server, agent_id, other_key, body).status_code == 404
    # A viewer's key may not run agents: none is exposed to it.
    viewer = new_key(agent.agency, MemberRole.VIEWER)
    with pytest.raises(AgentCardResolutionError):
        _get(server, agent, viewer, task.id)
    assert _status(task.id, agent.agency_id).status == ExecutionStatus.WAITING_APPROVAL

    # The agency's own key cancels it: a waiting run ends at once.
    assert _cancel(server, agent, key, task.id).status.state == TaskState.TASK_STATE_CANCELED
    execution = _status(task.id, agent.agency_id)
    assert (execution.status, execution.error) == ("cancelled", "Cancelled by the A2A client.")


def test_bad_requests_are_json_rpc_errors_and_start_nothing(
    server: AsgiServer, make_agent: Callable[..., Agent]
) -> None:
    agent = make_agent("openai")
    key = new_key(agent.agency)

    def send(*parts: dict[str, Any]) -> dict[str, Any]:
        message = {"messageId": "m1", "role": "ROLE_USER", "parts": list(parts)}
        body = {"jsonrpc": "2.0", "id": 3, "method": "SendMessage", "params": {"message": message}}
        answer = _rpc(server, agent.id, key, body)
        assert answer.status_code == 200
        return answer.json()["error"]

    assert _rpc(server, agent.id, key, "{not json").json()["error"]["code"] == -32700
    unknown = {"jsonrpc": "2.0", "id": 1, "method": "DoSomething", "params": {}}
    assert _rpc(server, agent.id, key, unknown).json()["error"]["code"] == -32601
    nothing = send({"text": "  "})
    assert (nothing["code"], nothing["message"]) == (
        -32602,
        "The message has no text or data part: say what to do.",
    )
    assert send({"text": "Summarise"}, {"data": [1, 2]})["code"] == -32602
    a_file = send({"text": "Read this"}, {"url": "https://example.com/a.pdf"})
    assert a_file["code"] == -32005  # content type not supported
    too_long = send({"text": "x" * 20_001})
    assert too_long["code"] == -32602
    assert "longer than 20000" in too_long["message"]
    huge = send({"text": "x" * 1_000_001})  # past AGENTDESK_A2A_MAX_BODY_BYTES: never parsed
    assert (huge["code"], huge["message"]) == (-32600, "Payload too large")
    missing = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {}}
    assert _rpc(server, agent.id, key, missing).json()["error"]["code"] == -32602
    unauthenticated = _rpc(server, agent.id, None, unknown)
    assert unauthenticated.status_code == 401
    assert unauthenticated.headers["www-authenticate"] == 'Bearer realm="api"'
    with tenancy.agency_context(agent.agency_id):
        assert not Execution.objects.filter(agent=agent).exists()


def test_guessed_keys_are_counted_per_address_and_refused_past_the_limit(
    server: AsgiServer, make_agent: Callable[..., Agent]
) -> None:
    agent = make_agent("openai")
    key = new_key(agent.agency)
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": str(uuid.uuid4())}}
    n = uuid.uuid4().int
    guesser, other = (f"10.{n % 250}.{(n >> 8) % 250}.{i}" for i in (1, 2))

    def post(credential: str, address: str) -> httpx.Response:
        headers = {"Authorization": f"Bearer {credential}", "X-Forwarded-For": address,
                   "A2A-Version": "1.0"}  # fmt: skip
        return httpx.post(_base(server, agent.id), headers=headers, json=body, timeout=60)

    for _ in range(BAD_KEYS):
        guess = post(f"adk_guess_{uuid.uuid4().hex}", guesser)
        assert (guess.status_code, guess.json()["code"]) == (401, "authentication_failed")
    refused = post(key, guesser)  # a good key too, from that address
    assert (refused.status_code, refused.json()["code"]) == (429, "throttled")
    assert int(refused.headers["retry-after"]) > 0
    answered = post(key, other)
    assert answered.status_code == 200
    assert answered.json()["error"]["code"] == -32001  # no such task
