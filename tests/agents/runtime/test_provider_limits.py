"""An LLM provider's requests and tokens per minute (LLMProvider.requests_per_minute /
tokens_per_minute), counted on the real (embedded) Redis and kept by real workers: a run that
reaches a limit waits for the next window without a worker, and beat resumes it."""

from __future__ import annotations

import datetime
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from agents.models import Agent, Execution, ExecutionStatus, LLMProvider, StepType
from agents.runtime import provider_limits
from agents.runtime.loop import run_execution
from agents.runtime.provider_limits import KEY_PREFIX, ProviderLimits, Refusal, Slot
from agents.services import execution_cancel, execution_create
from agents.tasks import reap_expired_leases
from core import tenancy
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import by_turn, text_reply, tool_call_reply
from tests.processes import (
    Worker,
    cancel_from_elsewhere,
    pending_execution,
    wait_for,
)
from tools.ratelimit import get_redis

# 15 s into a minute: the window arithmetic is exact and no test straddles a real boundary.
T0 = 1_900_000_800.0 + 15
# How far from a minute's end the real-time tests keep (a run's two calls take milliseconds).
SAFETY = datetime.timedelta(seconds=10)
UNREACHABLE = "redis://127.0.0.1:1/0"  # nothing listens on port 1


@pytest.fixture
def provider_id() -> Iterator[uuid.UUID]:
    provider = uuid.uuid4()
    yield provider
    _forget_counters(provider)


def _forget_counters(provider: uuid.UUID) -> None:
    client = get_redis()
    keys = list(client.scan_iter(match=f"{KEY_PREFIX}:{provider}:*"))
    if keys:
        client.delete(*keys)


def _counters(provider: uuid.UUID) -> dict[str, int]:
    client = get_redis()
    return {
        key.decode().split(":")[3]: int(client.get(key) or 0)
        for key in client.scan_iter(match=f"{KEY_PREFIX}:{provider}:*")
    }


@pytest.mark.parametrize("limits", [None, ProviderLimits(uuid.uuid4()), ProviderLimits(
    uuid.uuid4(), requests_per_minute=0, tokens_per_minute=0)])  # fmt: skip
def test_no_limits_allow_every_call_and_keep_no_counters(limits: ProviderLimits | None) -> None:
    for _ in range(20):
        assert provider_limits.acquire(limits, tokens=500, now=T0) is None
        provider_limits.settle(limits, Slot(window=int(T0 - 15), tokens=500), 1000)
    if limits is not None:
        assert _counters(limits.provider_id) == {}


def test_the_request_limit_refuses_the_call_after_n_until_the_window_ends(
    provider_id: uuid.UUID,
) -> None:
    limits = ProviderLimits(provider_id, requests_per_minute=3)
    window = int(T0 - 15)
    granted = [provider_limits.acquire(limits, tokens=100, now=T0 + i) for i in range(3)]
    assert granted == [Slot(window=window, tokens=0)] * 3  # no token limit: nothing reserved
    refusal = provider_limits.acquire(limits, now=T0 + 10)
    assert refusal == Refusal(limit="requests_per_minute", value=3, retry_at=window + 60)
    assert _counters(provider_id) == {"requests": 3}  # a refused call is not counted
    assert isinstance(provider_limits.acquire(limits, now=T0 + 45), Slot)  # the next minute


def test_the_token_limit_reserves_each_calls_estimate_and_counts_what_it_used(
    provider_id: uuid.UUID,
) -> None:
    limits = ProviderLimits(provider_id, requests_per_minute=100, tokens_per_minute=1000)
    first = provider_limits.acquire(limits, tokens=300, now=T0)
    assert first == Slot(window=int(T0 - 15), tokens=300)
    assert _counters(provider_id)["tokens"] == 300  # reserved before the call goes out
    # A call whose estimate does not fit beside what the window holds waits...
    assert isinstance(provider_limits.acquire(limits, tokens=800, now=T0 + 1), Refusal)
    # ...one that fits goes out.
    second = provider_limits.acquire(limits, tokens=600, now=T0 + 1)
    assert isinstance(second, Slot)
    assert _counters(provider_id)["tokens"] == 900
    provider_limits.settle(limits, first, 250)  # replies: what the calls really used
    provider_limits.settle(limits, second, 800)
    assert _counters(provider_id) == {"requests": 2, "tokens": 1050}
    refusal = provider_limits.acquire(limits, tokens=0, now=T0 + 3)
    assert refusal == Refusal(limit="tokens_per_minute", value=1000, retry_at=T0 + 45)
    assert _counters(provider_id)["requests"] == 2  # refused by the tokens: not counted
    # The next window is empty: a call bigger than the whole limit still goes out, alone.
    big = provider_limits.acquire(limits, tokens=5000, now=T0 + 46)
    assert big == Slot(window=int(T0 + 45), tokens=5000)
    assert isinstance(provider_limits.acquire(limits, tokens=1, now=T0 + 47), Refusal)


def test_settling_after_the_window_expired_creates_no_counter(provider_id: uuid.UUID) -> None:
    limits = ProviderLimits(provider_id, tokens_per_minute=1000)
    provider_limits.settle(limits, Slot(window=int(T0 - 15), tokens=300), 50)
    assert _counters(provider_id) == {}


def test_an_unreachable_redis_lets_calls_through_and_never_raises(
    provider_id: uuid.UUID, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    unreachable = redis.Redis.from_url(UNREACHABLE, socket_connect_timeout=1, socket_timeout=1)
    monkeypatch.setattr(provider_limits, "get_redis", lambda: unreachable)
    limits = ProviderLimits(provider_id, requests_per_minute=1, tokens_per_minute=10)
    with caplog.at_level(logging.WARNING, logger="agents.runtime.provider_limits"):
        assert provider_limits.acquire(limits, tokens=5, now=T0) is None
        provider_limits.settle(limits, Slot(window=int(T0 - 15), tokens=5), 50)
    assert "rate limits cannot be kept" in caplog.text
    assert "tokens not counted" in caplog.text


def test_counters_are_per_provider(provider_id: uuid.UUID) -> None:
    other = uuid.uuid4()
    try:
        assert isinstance(provider_limits.acquire(ProviderLimits(provider_id, 1), now=T0), Slot)
        assert isinstance(provider_limits.acquire(ProviderLimits(provider_id, 1), now=T0), Refusal)
        assert isinstance(provider_limits.acquire(ProviderLimits(other, 1), now=T0), Slot)
    finally:
        _forget_counters(other)


def test_concurrent_calls_get_exactly_the_limit(provider_id: uuid.UUID) -> None:
    limits = ProviderLimits(provider_id, requests_per_minute=25)
    barrier = threading.Barrier(30)
    allowed: list[bool] = []
    lock = threading.Lock()

    def call() -> None:
        barrier.wait()
        for _ in range(3):
            granted = provider_limits.acquire(limits, now=T0)
            with lock:
                allowed.append(isinstance(granted, Slot))

    threads = [threading.Thread(target=call) for _ in range(30)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(allowed) == 25
    assert len(allowed) == 90


# --- through a real worker ---------------------------------------------------------------------


def _limited_agent(
    make_agent: Callable[..., Agent], server: FakeProviderServer, kind: str, **limits: int
) -> tuple[Agent, LLMProvider]:
    # The run's first call must fall in this minute (the next one is filled below): not in its
    # last seconds.
    while (time.time() + SAFETY.total_seconds()) % 60 < SAFETY.total_seconds():
        time.sleep(0.2)
    agent = make_agent(kind, allowed_tools=["crm_search_contacts"])
    server.set_responder(
        by_turn(tool_call_reply("crm_search_contacts", {"query": "ada"}), text_reply("None.")),
        key=agent.llm_model,
    )
    with tenancy.agency_context(agent.agency_id):
        provider = LLMProvider.objects.get(agency_id=agent.agency_id)
        for name, value in limits.items():
            setattr(provider, name, value)
        provider.save()
    # The next minute starts full: a run's second call is refused even if it crosses into it.
    after = (int(time.time()) // 60 + 1) * 60
    client = get_redis()
    for counter, name in (("requests", "requests_per_minute"), ("tokens", "tokens_per_minute")):
        if limits.get(name):
            client.set(f"{KEY_PREFIX}:{provider.id}:{counter}:{after}", limits[name], ex=125)
    return agent, provider


def _start(agent: Agent) -> Execution:
    with tenancy.agency_context(agent.agency_id):
        execution = execution_create(agent=agent, input="Find Ada.")
    assert execution is not None
    return execution


def _window_over(execution: Execution, provider: LLMProvider) -> None:
    """What the passing of the minute does: the counters expire, the parked run falls due."""
    _forget_counters(provider.id)
    with tenancy.agency_context(execution.agency_id):
        Execution.objects.filter(pk=execution.pk).update(
            wait_until=datetime.datetime.now(tz=datetime.UTC) - datetime.timedelta(seconds=1)
        )


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_a_run_over_the_request_limit_waits_without_a_worker_and_resumes_unchanged(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
    kind: str,
) -> None:
    agent, provider = _limited_agent(make_agent, fake_llm_server, kind, requests_per_minute=1)
    try:
        execution = wait_for(_start(agent), {"waiting_input", "completed", "failed"})
        # The first call went out; the second would exceed 1 per minute: the run waits.
        assert execution.status == ExecutionStatus.WAITING_INPUT, execution.error
        assert execution.lease_owner == ""
        assert execution.input_request["kind"] == "provider_rate_limit"
        assert execution.input_request["limit"] == "requests_per_minute"
        assert execution.wait_until is not None
        assert execution.wait_until.timestamp() % 60 == 0  # the end of the minute
        assert len(fake_llm_server.requests_for(agent.llm_model)) == 1
        with tenancy.agency_context(agent.agency_id):
            transition = execution.state_transitions.order_by("-created_at").first()
        assert transition is not None
        assert "limit of 1 requests per minute is reached" in transition.transition_reason

        if execution.wait_until > datetime.datetime.now(tz=datetime.UTC) + SAFETY:
            reap_expired_leases()  # beat's timer check before the window is over
            assert _still_waiting(execution)
        _window_over(execution, provider)
        assert reap_expired_leases() >= 1  # beat's timer check
        execution = wait_for(execution)
        assert execution.status == ExecutionStatus.COMPLETED, execution.error
        requests = fake_llm_server.requests_for(agent.llm_model)
        assert len(requests) == 2
        # The model's conversation goes on as if nothing happened: no observation was added.
        with tenancy.agency_context(agent.agency_id):
            types = list(
                execution.steps.order_by("step_number").values_list("step_type", flat=True)
            )
        assert StepType.OBSERVE not in types[1:]
    finally:
        _forget_counters(provider.id)


def _still_waiting(execution: Execution) -> bool:
    with tenancy.agency_context(execution.agency_id):
        return Execution.objects.get(pk=execution.pk).status == ExecutionStatus.WAITING_INPUT


@pytest.mark.slow
def test_the_tokens_a_run_used_count_against_the_token_limit(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent, provider = _limited_agent(make_agent, fake_llm_server, "openai", tokens_per_minute=1)
    try:
        execution = wait_for(_start(agent), {"waiting_input", "completed", "failed"})
        assert execution.status == ExecutionStatus.WAITING_INPUT, execution.error
        assert execution.input_request["limit"] == "tokens_per_minute"
        assert execution.wait_until is not None
        window = int(execution.wait_until.timestamp()) - 60  # the minute the run was refused in
        used = get_redis().get(f"{KEY_PREFIX}:{provider.id}:tokens:{window}")
        assert int(used or 0) == execution.tokens_total > 0  # what it used, not its estimate
        _window_over(execution, provider)
        assert reap_expired_leases() >= 1
        assert wait_for(execution).status == ExecutionStatus.COMPLETED
    finally:
        _forget_counters(provider.id)


@pytest.mark.slow
def test_a_run_waiting_for_the_window_is_cancelled_at_once_and_not_resumed(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent, provider = _limited_agent(make_agent, fake_llm_server, "openai", requests_per_minute=1)
    try:
        execution = wait_for(_start(agent), {"waiting_input", "completed", "failed"})
        assert execution.status == ExecutionStatus.WAITING_INPUT, execution.error
        with tenancy.agency_context(agent.agency_id):
            cancelled = execution_cancel(execution=execution)
        assert cancelled.status == ExecutionStatus.CANCELLED
        _window_over(execution, provider)
        reap_expired_leases()
        with tenancy.agency_context(agent.agency_id):
            execution.refresh_from_db()
        assert execution.status == ExecutionStatus.CANCELLED
        assert len(fake_llm_server.requests_for(agent.llm_model)) == 1
    finally:
        _forget_counters(provider.id)


# --- in this process: the run's thread, the real database, Redis and fake provider --------------


def _reloaded(execution: Execution) -> Execution:
    with tenancy.agency_context(execution.agency_id):
        return Execution.objects.get(pk=execution.pk)


def test_with_redis_unreachable_a_limited_run_goes_on_unthrottled(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    agent, provider = _limited_agent(
        make_agent, fake_llm_server, "openai", requests_per_minute=1, tokens_per_minute=10
    )
    _forget_counters(provider.id)
    unreachable = redis.Redis.from_url(UNREACHABLE, socket_connect_timeout=1, socket_timeout=1)
    monkeypatch.setattr(provider_limits, "get_redis", lambda: unreachable)
    execution = pending_execution(agent, input_text="Find Ada.")
    assert run_execution(execution.id, agency_id=agent.agency_id) == "completed"
    assert _reloaded(execution).status == ExecutionStatus.COMPLETED
    assert len(fake_llm_server.requests_for(agent.llm_model)) == 2


def test_a_cancel_that_lands_while_the_run_parks_cancels_it_at_once(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    agent, provider = _limited_agent(make_agent, fake_llm_server, "openai", requests_per_minute=1)
    execution = pending_execution(agent, input_text="Find Ada.")
    acquire = provider_limits.acquire

    def cancelled_meanwhile(*args: Any, **kwargs: Any) -> Any:
        granted = acquire(*args, **kwargs)
        if isinstance(granted, Refusal):  # someone cancels from elsewhere, just now
            cancel_from_elsewhere(execution)
        return granted

    monkeypatch.setattr(provider_limits, "acquire", cancelled_meanwhile)
    try:
        assert run_execution(execution.id, agency_id=agent.agency_id) == "cancelled"
        ended = _reloaded(execution)
        assert ended.status == ExecutionStatus.CANCELLED  # not left waiting for the minute
        assert ended.wait_until is None
    finally:
        _forget_counters(provider.id)
