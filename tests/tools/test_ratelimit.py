"""Per-agent per-tool rate limits on the real (embedded) Redis from settings.REDIS_URL."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest
import redis

from tools.ratelimit import KEY_PREFIX, RateLimitResult, check_and_consume, get_redis

# A fixed instant 15 s into a minute (and into an hour): window arithmetic is exact, and no test
# can straddle a real window boundary.
T0 = 1_900_000_800.0 + 15  # 1_900_000_800 is a multiple of 3600


@pytest.fixture
def client() -> redis.Redis:
    return get_redis()


@pytest.fixture
def agent_id(client: redis.Redis) -> Iterator[str]:
    agent = str(uuid.uuid4())
    yield agent
    keys = list(client.scan_iter(match=f"{KEY_PREFIX}:{agent}:*"))
    if keys:
        client.delete(*keys)


def _keys(client: redis.Redis, agent: str) -> list[str]:
    return sorted(k.decode() for k in client.scan_iter(match=f"{KEY_PREFIX}:{agent}:*"))


def test_get_redis_uses_the_project_redis_with_one_cached_pool() -> None:
    first, second = get_redis(), get_redis()
    assert first.connection_pool is second.connection_pool
    assert first.ping() is True


@pytest.mark.parametrize(("per_minute", "per_hour"), [(None, None), (0, 0), (0, None)])
def test_no_limits_means_unlimited_and_no_counters(
    client: redis.Redis, agent_id: str, per_minute: int | None, per_hour: int | None
) -> None:
    for _ in range(50):
        result = check_and_consume(
            client,
            agent_id=agent_id,
            tool_name="crm_get_contact",
            per_minute=per_minute,
            per_hour=per_hour,
        )
        assert result == RateLimitResult(allowed=True, retry_after_s=0, limit=None)
    assert _keys(client, agent_id) == []


def test_per_minute_limit_refuses_the_call_after_n(client: redis.Redis, agent_id: str) -> None:
    results = [
        check_and_consume(
            client, agent_id=agent_id, tool_name="email_send", per_minute=3, per_hour=None, now=T0
        )
        for _ in range(5)
    ]
    assert [r.allowed for r in results] == [True, True, True, False, False]
    refused = results[3]
    assert refused.limit == "per_minute"
    assert refused.max_calls == 3
    assert refused.retry_after_s == 45  # the minute window ends 45 s after T0
    assert "at most 3 calls per minute" in refused.message("email_send")
    assert "Retry after 45 s" in refused.message("email_send")


def test_a_new_minute_window_allows_calls_again(client: redis.Redis, agent_id: str) -> None:
    def call(now: float) -> bool:
        return check_and_consume(
            client, agent_id=agent_id, tool_name="web_scrape", per_minute=1, per_hour=None, now=now
        ).allowed

    assert call(T0)
    assert not call(T0 + 44)
    assert call(T0 + 45)  # next minute
    assert not call(T0 + 46)


def test_hourly_refusal_does_not_use_up_minute_slots(client: redis.Redis, agent_id: str) -> None:
    def call() -> RateLimitResult:
        return check_and_consume(
            client, agent_id=agent_id, tool_name="task_create", per_minute=5, per_hour=2, now=T0
        )

    assert [call().allowed for _ in range(2)] == [True, True]
    refused = call()
    assert (refused.allowed, refused.limit, refused.max_calls) == (False, "per_hour", 2)
    assert refused.retry_after_s == 3600 - 15
    hour_key, minute_key = _keys(client, agent_id)  # sorted: ":3600:" < ":60:"
    assert minute_key.endswith(":60:1900000800")
    assert hour_key.endswith(":3600:1900000800")
    assert client.get(minute_key) == b"2"  # the refused call was not counted anywhere
    assert client.get(hour_key) == b"2"
    assert 0 < client.ttl(minute_key) <= 65
    assert 3600 < client.ttl(hour_key) <= 3605


def test_counters_are_per_agent_and_per_tool(client: redis.Redis, agent_id: str) -> None:
    other_agent = str(uuid.uuid4())
    try:
        for agent, tool in [(agent_id, "a_tool"), (agent_id, "b_tool"), (other_agent, "a_tool")]:
            assert check_and_consume(
                client, agent_id=agent, tool_name=tool, per_minute=1, per_hour=None, now=T0
            ).allowed
        assert not check_and_consume(
            client, agent_id=agent_id, tool_name="a_tool", per_minute=1, per_hour=None, now=T0
        ).allowed
    finally:
        client.delete(*[k.encode() for k in _keys(client, other_agent)])


def test_uuid_agent_ids_are_accepted(client: redis.Redis, agent_id: str) -> None:
    result = check_and_consume(
        client, agent_id=uuid.UUID(agent_id), tool_name="x", per_minute=1, per_hour=None, now=T0
    )
    assert result.allowed
    assert len(_keys(client, agent_id)) == 1


def test_negative_limits_are_rejected(client: redis.Redis, agent_id: str) -> None:
    with pytest.raises(ValueError, match="per_hour must be >= 0"):
        check_and_consume(client, agent_id=agent_id, tool_name="x", per_minute=1, per_hour=-1)


def test_concurrent_calls_allow_exactly_the_limit(client: redis.Redis, agent_id: str) -> None:
    """40 threads x 5 calls race for 30 minute slots (and a 35-per-hour cap that never binds)."""
    limit, threads, calls_each = 30, 40, 5
    barrier = threading.Barrier(threads)
    outcomes: list[RateLimitResult] = []
    lock = threading.Lock()

    def worker() -> None:
        own = get_redis()  # each thread its own client on the shared pool, as workers do
        barrier.wait()
        for _ in range(calls_each):
            result = check_and_consume(
                own,
                agent_id=agent_id,
                tool_name="crm_search_contacts",
                per_minute=limit,
                per_hour=35,
                now=T0,
            )
            with lock:
                outcomes.append(result)

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()

    assert len(outcomes) == threads * calls_each
    assert sum(r.allowed for r in outcomes) == limit
    assert {r.limit for r in outcomes if not r.allowed} == {"per_minute"}
    hour_key, minute_key = _keys(client, agent_id)  # sorted: ":3600:" < ":60:"
    assert client.get(minute_key) == client.get(hour_key) == str(limit).encode()
