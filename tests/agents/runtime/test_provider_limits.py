"""An LLM provider's requests and tokens per minute (LLMProvider.requests_per_minute /
tokens_per_minute), counted on the real (embedded) Redis and kept by real workers: a run that
reaches a limit waits for the next window without a worker, and beat resumes it."""

from __future__ import annotations

import datetime
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from agents.llm.fake_server import FakeProviderServer
from agents.llm.fake_server.script import by_turn, text_reply, tool_call_reply
from agents.models import Agent, Execution, ExecutionStatus, LLMProvider, StepType
from agents.runtime import provider_limits
from agents.runtime.provider_limits import KEY_PREFIX, ProviderLimits, Refusal
from agents.services import execution_create
from agents.tasks import reap_expired_leases
from core import tenancy
from tests.agents.runtime.conftest import Worker, wait_for
from tools.ratelimit import get_redis

# 15 s into a minute: the window arithmetic is exact and no test straddles a real boundary.
T0 = 1_900_000_800.0 + 15
# How far from a minute's end the real-time tests keep (a run's two calls take milliseconds).
SAFETY = datetime.timedelta(seconds=3)


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
        assert provider_limits.acquire(limits, now=T0) is None
        provider_limits.count_tokens(limits, 1000, now=T0)
    if limits is not None:
        assert _counters(limits.provider_id) == {}


def test_the_request_limit_refuses_the_call_after_n_until_the_window_ends(
    provider_id: uuid.UUID,
) -> None:
    limits = ProviderLimits(provider_id, requests_per_minute=3)
    assert [provider_limits.acquire(limits, now=T0 + i) for i in range(3)] == [None] * 3
    refusal = provider_limits.acquire(limits, now=T0 + 10)
    assert refusal == Refusal(limit="requests_per_minute", value=3, retry_at=T0 - 15 + 60)
    assert _counters(provider_id) == {"requests": 3}  # a refused call is not counted
    assert provider_limits.acquire(limits, now=T0 + 45) is None  # the next minute


def test_the_token_limit_refuses_once_the_window_used_it_up(provider_id: uuid.UUID) -> None:
    limits = ProviderLimits(provider_id, requests_per_minute=100, tokens_per_minute=1000)
    assert provider_limits.acquire(limits, now=T0) is None
    provider_limits.count_tokens(limits, 600, now=T0)
    assert provider_limits.acquire(limits, now=T0 + 1) is None  # 600 < 1000: may go out
    provider_limits.count_tokens(limits, 700, now=T0 + 2)  # the last call may overshoot
    refusal = provider_limits.acquire(limits, now=T0 + 3)
    assert refusal is not None
    assert (refusal.limit, refusal.value, refusal.retry_at) == ("tokens_per_minute", 1000, T0 + 45)
    # Refused by the tokens, the request was not counted either.
    assert _counters(provider_id) == {"requests": 2, "tokens": 1300}
    assert provider_limits.acquire(limits, now=T0 + 46) is None


def test_counters_are_per_provider(provider_id: uuid.UUID) -> None:
    other = uuid.uuid4()
    try:
        assert provider_limits.acquire(ProviderLimits(provider_id, 1), now=T0) is None
        assert provider_limits.acquire(ProviderLimits(provider_id, 1), now=T0) is not None
        assert provider_limits.acquire(ProviderLimits(other, 1), now=T0) is None
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
            refusal = provider_limits.acquire(limits, now=T0)
            with lock:
                allowed.append(refusal is None)

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
    return agent, provider


def _start(agent: Agent) -> Execution:
    # Both model calls of a run must fall in one minute window for the limit to bind.
    while (time.time() + SAFETY.total_seconds()) % 60 < SAFETY.total_seconds():
        time.sleep(0.2)
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
        assert _counters(provider.id)["tokens"] == execution.tokens_total > 0
        _window_over(execution, provider)
        assert reap_expired_leases() >= 1
        assert wait_for(execution).status == ExecutionStatus.COMPLETED
    finally:
        _forget_counters(provider.id)
