"""Token streaming: while a model call runs and somebody watches the execution, its text goes to
the execution's group as ``execution.token`` messages; the reply is persisted exactly as an
unstreamed one; a run nobody watches makes no streamed request. Real Redis (a plain subscription
on the group's channel, which the pub/sub layer's consumers also make), the fake provider server
and the real SDK clients, both wire formats."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from channels.layers import get_channel_layer

from agents import tasks
from agents.lifecycle import protocol
from agents.models import Agent, Execution, ExecutionStatus, ExecutionStep, StepType
from agents.runtime.loop import run_execution
from core import realtime, tenancy
from core.realtime import listening, publishing
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import Reply, by_turn, rate_limited, text_reply, tool_call_reply
from tests.processes import Worker, pending_execution, wait_for

KINDS = ["openai", "anthropic", "google"]
THOUGHT = "I will look the contact up first, then write the note the user asked for."
ANSWER = (
    "Ada Lovelace is a long-standing client: she wrote the first program for the Analytical "
    "Engine, and she asked us twice this month about the new plan and its pricing."
)
PARTIAL = "This reply is cut off before its end and must never be stored anywhere"
# Where a stream is cut after all its text went out: before OpenAI's finish chunk, before
# Anthropic's text block's end, before Gemini's last chunk (its finishReason).
AFTER_TEXT = {"openai": -3, "anthropic": -3, "google": -1}


class GroupListener:
    """Everything published to one execution's group, in order. ``watcher=False`` listens with a
    pattern subscription, which ``PUBSUB NUMSUB`` does not count: it sees without watching."""

    def __init__(self, execution: Execution, *, watcher: bool = True) -> None:
        layer = get_channel_layer()
        target = publishing._pubsub_target(layer)
        assert target is not None, "the tests' channel layer is the Redis pub/sub layer"
        url, prefix = target
        self._layer = layer
        self.channel = publishing._group_channel(prefix, realtime.execution_group(execution.id))
        self._pubsub = redis.Redis.from_url(url).pubsub(ignore_subscribe_messages=True)
        if watcher:
            self._pubsub.subscribe(self.channel)
        else:
            self._pubsub.psubscribe(self.channel)
        self._pubsub.get_message(timeout=2)  # the subscription is confirmed
        self.messages: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._listen, daemon=True)
        self._thread.start()

    def _listen(self) -> None:
        while not self._stop.is_set():
            message = self._pubsub.get_message(timeout=0.05)
            if message is not None and message["type"] in ("message", "pmessage"):
                self.messages.append(self._layer.deserialize(message["data"]))

    def close(self, *, until_status: set[str] | None = None, timeout: float = 5.0) -> None:
        """Stop listening once a status event to one of ``until_status`` arrived."""
        realtime.flush()
        deadline = time.monotonic() + timeout
        while until_status and time.monotonic() < deadline:
            if any(m.get("kind") == "status" and m["status"] in until_status for m in self.events):
                break
            time.sleep(0.02)
        self._stop.set()
        self._thread.join()
        self._pubsub.close()

    @property
    def tokens(self) -> list[dict[str, Any]]:
        return [m for m in self.messages if m["type"] == protocol.GROUP_TOKEN]

    @property
    def events(self) -> list[dict[str, Any]]:
        return [m for m in self.messages if m["type"] == protocol.GROUP_EVENT]

    def streamed(self, step_number: int) -> str:
        return "".join(m["text"] for m in self.tokens if m["step_number"] == step_number)


@pytest.fixture
def listeners() -> Iterator[list[GroupListener]]:
    opened: list[GroupListener] = []
    yield opened
    for listener in opened:
        if listener._thread.is_alive():
            listener.close()


def _think_steps(execution: Execution) -> list[ExecutionStep]:
    with tenancy.agency_context(execution.agency_id):
        return list(execution.steps.filter(step_type=StepType.THINK).order_by("step_number"))


def _all_text(execution: Execution) -> str:
    with tenancy.agency_context(execution.agency_id):
        steps = list(execution.steps.all())
        row = Execution.objects.get(pk=execution.pk)
    return (
        " ".join(f"{s.reasoning} {s.output_text} {s.llm_response} {s.input_text}" for s in steps)
        + f" {row.output} {row.error}"
    )


def _run(execution: Execution) -> Execution:
    run_execution(execution.id, agency_id=execution.agency_id)
    with tenancy.agency_context(execution.agency_id):
        return Execution.objects.get(pk=execution.pk)


@pytest.mark.parametrize("kind", KINDS)
def test_a_watched_run_streams_each_calls_text_in_order_before_its_step(
    kind: str,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    listeners: list[GroupListener],
) -> None:
    agent = make_agent(kind, allowed_tools=["crm_search_contacts"])
    fake_llm_server.set_responder(
        by_turn(
            tool_call_reply("crm_search_contacts", {"query": "ada"}, text=THOUGHT),
            # A word every 2 ms, faster than the publisher's batch window (5 ms): the watcher
            # gets it in several batches.
            Reply(text=ANSWER, stream_interval=0.002),
        ),
        key=agent.llm_model,
    )
    execution = pending_execution(agent, input_text="Who is Ada?")
    listener = GroupListener(execution)
    listeners.append(listener)

    execution = _run(execution)
    listener.close(until_status={ExecutionStatus.COMPLETED})

    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert [r.stream for r in fake_llm_server.requests_for(agent.llm_model)] == [True, True]
    first, final = _think_steps(execution)
    # What the watcher saw of each call is exactly what was persisted when it ended.
    assert first.reasoning == listener.streamed(first.step_number) == THOUGHT
    assert final.output_text == listener.streamed(final.step_number) == ANSWER
    assert execution.output == ANSWER
    assert {m["execution_id"] for m in listener.tokens} == {str(execution.id)}
    assert {m["step_number"] for m in listener.tokens} == {first.step_number, final.step_number}
    # Batched: fewer messages than the model's pieces (one per word), yet more than one.
    final_tokens = [m for m in listener.tokens if m["step_number"] == final.step_number]
    assert 1 < len(final_tokens) < len(ANSWER.split())
    # Each call's text reaches the group before the step that persists it.
    order = [
        ("token", m["step_number"]) if m["type"] == protocol.GROUP_TOKEN
        else (m.get("kind"), (m.get("data") or {}).get("step_number"))
        for m in listener.messages
    ]  # fmt: skip
    for step in (first, final):
        last_token = max(i for i, o in enumerate(order) if o == ("token", step.step_number))
        assert order.index(("step", step.step_number)) > last_token


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_nobody_watches_makes_no_streamed_request_and_publishes_no_tokens(
    kind: str,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    listeners: list[GroupListener],
) -> None:
    agent = make_agent(kind, allowed_tools=["crm_search_contacts"])
    fake_llm_server.set_responder(
        by_turn(
            tool_call_reply("crm_search_contacts", {"query": "ada"}, text=THOUGHT),
            text_reply(ANSWER),
        ),
        key=agent.llm_model,
    )
    execution = pending_execution(agent, input_text="Who is Ada?")
    observer = GroupListener(execution, watcher=False)  # sees the group, is no watcher
    listeners.append(observer)

    execution = _run(execution)
    observer.close(until_status={ExecutionStatus.COMPLETED})

    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert [r.stream for r in fake_llm_server.requests_for(agent.llm_model)] == [False, False]
    assert observer.tokens == []
    assert [m["kind"] for m in observer.events].count("step") >= 3  # the steps did go out
    assert execution.output == ANSWER


@pytest.mark.parametrize("kind", KINDS)
def test_a_stream_cut_mid_way_is_retried_and_only_the_retrys_reply_is_persisted(
    kind: str,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    listeners: list[GroupListener],
) -> None:
    agent = make_agent(kind, allowed_tools=[])
    # Cut after its text went out (AFTER_TEXT), then the retry's whole answer.
    cut = Reply(text=PARTIAL, stream_events=AFTER_TEXT[kind])
    fake_llm_server.enqueue(cut, text_reply(ANSWER), key=agent.llm_model)
    execution = pending_execution(agent, input_text="Who is Ada?")
    listener = GroupListener(execution)
    listeners.append(listener)

    execution = _run(execution)
    listener.close(until_status={ExecutionStatus.COMPLETED})

    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    # Retried as an unstreamed call would be; the retry is not streamed (no text twice).
    assert [r.stream for r in fake_llm_server.requests_for(agent.llm_model)] == [True, False]
    (think,) = _think_steps(execution)
    assert think.output_text == execution.output == ANSWER
    assert (think.llm_response or {})["attempts"] == 2
    assert listener.streamed(think.step_number) == PARTIAL  # what the watcher saw, void now
    assert PARTIAL not in _all_text(execution)


@pytest.mark.parametrize("kind", KINDS)
def test_a_stream_cut_mid_way_with_no_retry_left_fails_the_run_and_stores_none_of_it(
    kind: str,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    listeners: list[GroupListener],
) -> None:
    agent = make_agent(kind, allowed_tools=[])
    # AGENTDESK_LLM_MAX_RETRIES is 2 in the tests: three attempts, none answered.
    fake_llm_server.enqueue(
        Reply(text=PARTIAL, stream_events=AFTER_TEXT[kind]),
        rate_limited(0.01),
        rate_limited(0.01),
        key=agent.llm_model,
    )
    execution = pending_execution(agent, input_text="Who is Ada?")
    listener = GroupListener(execution)
    listeners.append(listener)

    execution = _run(execution)
    listener.close(until_status={ExecutionStatus.FAILED})

    assert execution.status == ExecutionStatus.FAILED
    assert "rate limiting" in execution.error  # the last attempt's error, as unstreamed
    assert fake_llm_server.script(agent.llm_model).remaining == 0
    assert _think_steps(execution) == []
    assert listener.streamed(execution.current_step + 1) == PARTIAL
    assert PARTIAL not in _all_text(execution)


class _SilentRedis:
    """A TCP server that accepts connections and never answers: Redis hung or blackholed."""

    def __init__(self) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.url = f"redis://127.0.0.1:{self._socket.getsockname()[1]}/0"
        self.connections: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return
            self.connections.append(connection)

    def close(self) -> None:
        self._socket.close()
        for connection in self.connections:
            connection.close()


@pytest.fixture(params=["silent", "refusing"], ids=["redis_hung", "redis_down"])
def unanswering_redis(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[_SilentRedis | None]:
    """Where the runtime asks whether anyone watches: a Redis that hangs, or none at all."""
    silent = _SilentRedis() if request.param == "silent" else None
    url = silent.url if silent is not None else "redis://127.0.0.1:1/0"  # nothing on port 1
    monkeypatch.setattr(listening, "listeners", listening.Listeners((url, "asgi")))
    yield silent
    if silent is not None:
        silent.close()


def test_when_redis_cannot_say_whether_anyone_watches_the_run_goes_on_unstreamed(
    unanswering_redis: _SilentRedis | None,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    settings: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings.AGENTDESK_TOKEN_WATCH_SECONDS = 60  # the background thread asks once
    agent = make_agent("openai", allowed_tools=["crm_search_contacts"], loop_threshold=0)
    search = tool_call_reply("crm_search_contacts", {"query": "ada"})
    fake_llm_server.set_responder(
        by_turn(search, search, search, search, then=text_reply(ANSWER)), key=agent.llm_model
    )
    execution = pending_execution(agent, input_text="Who is Ada?")

    with caplog.at_level(logging.WARNING, logger="core.realtime"):
        execution = _run(execution)

    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert [r.stream for r in fake_llm_server.requests_for(agent.llm_model)] == [False] * 5
    warnings = [r for r in caplog.records if "cannot tell whether anyone watches" in r.message]
    assert len(warnings) == 1  # once, not once per call
    # Asked by the background thread, and at most once by the run (its first call), each ask
    # ended by the short timeout: no call waited on Redis after that.
    assert listening.listeners.asks <= 2
    if unanswering_redis is not None:
        assert len(unanswering_redis.connections) <= 2


def test_a_watcher_who_arrives_during_a_run_gets_the_calls_that_start_afterwards(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    listeners: list[GroupListener],
    settings: Any,
) -> None:
    settings.AGENTDESK_TOKEN_WATCH_SECONDS = 0.1
    agent = make_agent("openai", allowed_tools=["crm_search_contacts"])
    search = tool_call_reply("crm_search_contacts", {"query": "ada"}, text=THOUGHT)
    slow = tool_call_reply("crm_search_contacts", {"query": "ada"}, text=THOUGHT, latency=1.0)
    fake_llm_server.set_responder(by_turn(slow, search, text_reply(ANSWER)), key=agent.llm_model)
    execution = pending_execution(agent, input_text="Who is Ada?")

    def arrive() -> None:  # while the first call is in progress
        deadline = time.monotonic() + 10
        while not fake_llm_server.requests_for(agent.llm_model) and time.monotonic() < deadline:
            time.sleep(0.005)
        listeners.append(GroupListener(execution))

    arriving = threading.Thread(target=arrive)
    arriving.start()
    execution = _run(execution)
    arriving.join()
    listener = listeners[0]
    listener.close(until_status={ExecutionStatus.COMPLETED})

    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    # The first call had started unwatched; the background look saw the watcher before the next.
    assert [r.stream for r in fake_llm_server.requests_for(agent.llm_model)] == [
        False,
        True,
        True,
    ]
    first, second, final = _think_steps(execution)
    assert listener.streamed(first.step_number) == ""
    assert listener.streamed(second.step_number) == second.reasoning == THOUGHT
    assert listener.streamed(final.step_number) == final.output_text == ANSWER


@pytest.mark.slow
def test_a_worker_streams_to_a_watcher_of_the_run(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
    listeners: list[GroupListener],
) -> None:
    agent = make_agent("anthropic", allowed_tools=[])
    fake_llm_server.set_responder(by_turn(text_reply(ANSWER)), key=agent.llm_model)
    execution = pending_execution(agent, input_text="Who is Ada?")
    listener = GroupListener(execution)
    listeners.append(listener)

    tasks.run_execution.apply_async(
        args=[str(execution.id)], kwargs={"agency_id": str(execution.agency_id)}
    )
    execution = wait_for(execution)
    listener.close(until_status={ExecutionStatus.COMPLETED})

    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    (think,) = _think_steps(execution)
    assert listener.streamed(think.step_number) == think.output_text == ANSWER
    assert [r.stream for r in fake_llm_server.requests_for(agent.llm_model)] == [True]
