"""Per-agent, per-tool rate limits (``Tool.rate_limit_per_minute`` / ``rate_limit_per_hour``).

Fixed windows counted in Redis: one counter per agent, tool, window length and window start
(``agentdesk:toolrl:<agent>:<tool>:<seconds>:<window start>``), expiring with its window. The
check and the increment of both windows happen in one Lua script, so concurrent calls from many
worker threads or processes can never overshoot a limit, and a call refused by the hourly limit
does not use up a minute slot.

Fixed windows allow up to twice a limit across a window boundary; that is fine for the purpose
(keep a runaway agent from hammering a tool), and costs one round trip per tool call.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal
from uuid import UUID

import redis
from django.conf import settings

__all__ = [
    "KEY_PREFIX",
    "RateLimitResult",
    "check_and_consume",
    "get_redis",
]

KEY_PREFIX = "agentdesk:toolrl"
LimitName = Literal["per_minute", "per_hour"]
_WINDOWS: tuple[tuple[LimitName, int], ...] = (("per_minute", 60), ("per_hour", 3600))

# KEYS[i]: counter of window i. ARGV[i]: its limit (0 = unlimited); ARGV[n + i]: its TTL.
# Returns 0 when the call is allowed (and counted), else the 1-based index of the full window.
_SCRIPT = """
local n = #KEYS
for i = 1, n do
  local limit = tonumber(ARGV[i])
  if limit > 0 and tonumber(redis.call('GET', KEYS[i]) or '0') >= limit then
    return i
  end
end
for i = 1, n do
  if tonumber(ARGV[i]) > 0 then
    if redis.call('INCR', KEYS[i]) == 1 then
      redis.call('EXPIRE', KEYS[i], ARGV[n + i])
    end
  end
end
return 0
"""


@dataclass(frozen=True, slots=True)
class RateLimitResult:
    allowed: bool
    retry_after_s: int  # 0 when allowed; else seconds until the full window ends (>= 1)
    limit: LimitName | None  # which limit refused the call; None when allowed
    max_calls: int | None = None  # the refusing limit's value

    def message(self, tool_name: str) -> str:
        """The tool error shown to the model when the call is refused."""
        if self.allowed:
            return f"Tool '{tool_name}' is within its rate limits."
        unit = "minute" if self.limit == "per_minute" else "hour"
        return (
            f"Rate limit exceeded for tool '{tool_name}': at most {self.max_calls} calls per "
            f"{unit} for this agent. Retry after {self.retry_after_s} s, or continue without it."
        )


_ALLOWED = RateLimitResult(allowed=True, retry_after_s=0, limit=None)


@lru_cache(maxsize=4)
def _pool(url: str) -> redis.ConnectionPool:
    # One pool per process and URL: each Redis() built on it is cheap and thread-safe.
    return redis.ConnectionPool.from_url(url, socket_timeout=5, socket_connect_timeout=5)


def get_redis() -> redis.Redis:
    """A client for ``settings.REDIS_URL`` on a per-process cached connection pool."""
    return redis.Redis(connection_pool=_pool(settings.REDIS_URL))


def _key(agent_id: str, tool_name: str, seconds: int, window_start: int) -> str:
    return f"{KEY_PREFIX}:{agent_id}:{tool_name}:{seconds}:{window_start}"


def check_and_consume(
    redis_client: redis.Redis,
    *,
    agent_id: UUID | str,
    tool_name: str,
    per_minute: int | None,
    per_hour: int | None,
    now: float | None = None,
) -> RateLimitResult:
    """Count one call of ``tool_name`` by ``agent_id`` if both limits allow it (atomically).

    ``None`` or ``0`` means unlimited; with no limit at all Redis is not contacted. ``now`` (a
    Unix time) exists for tests of window arithmetic; callers leave it out.
    """
    limits = {"per_minute": per_minute or 0, "per_hour": per_hour or 0}
    for name, value in limits.items():
        if value < 0:
            raise ValueError(f"rate limit {name} must be >= 0 or None, got {value}")
    if not any(limits.values()):
        return _ALLOWED

    at = time.time() if now is None else now
    keys: list[str] = []
    argv: list[int] = []
    ttls: list[int] = []
    window_ends: list[float] = []
    for name, seconds in _WINDOWS:
        start = int(at // seconds) * seconds
        keys.append(_key(str(agent_id), tool_name, seconds, start))
        argv.append(limits[name])
        ttls.append(seconds + 5)  # a little past the window, so a late INCR never lingers
        window_ends.append(start + seconds)

    # EVALSHA (EVAL once per server): the script text is not resent on every call.
    script = redis_client.register_script(_SCRIPT)
    refused = int(script(keys=keys, args=[*argv, *ttls]))
    if refused == 0:
        return _ALLOWED
    name, _seconds = _WINDOWS[refused - 1]
    return RateLimitResult(
        allowed=False,
        retry_after_s=max(1, math.ceil(window_ends[refused - 1] - at)),
        limit=name,
        max_calls=limits[name],
    )
