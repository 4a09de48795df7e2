"""An LLM provider's own limits (``LLMProvider.requests_per_minute`` / ``tokens_per_minute``),
kept by every worker together: a provider key is shared by all the agency's runs.

Fixed one-minute windows counted in Redis, per provider row and window start
(``agentdesk:llmrl:<provider>:<requests|tokens>:<window start>``), expiring with the window.
Before a model call, one Lua script checks both counters and, only if both allow the call,
counts the request and reserves the tokens the call may use (its estimated input plus its
``max_tokens``, as providers count them). When the reply arrives, the reservation is replaced by
the tokens the call really used. So concurrent runs on many workers never exceed the request
limit, and exceed the token limit only by what their estimates missed. A call bigger than the
whole token limit still goes out, alone, in a window nothing else has used.

Like any fixed window, up to twice a limit can go out across a minute boundary; windows follow
the workers' clocks. A refused run is not failed and holds no worker: it parks (``waiting_input``,
its input request says why) until the window ends, and beat's timer check resumes it
(agents.tasks). Limits of None or 0 mean none; without any, Redis is not contacted. If Redis
cannot be reached the call goes out unthrottled (logged): the provider's own 429 answers,
retried with backoff, are then the limit, and a run is never failed for the limiter's sake.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from typing import Literal

import redis

from agents.lifecycle.states import PROVIDER_RATE_LIMIT_WAIT
from tools.ratelimit import get_redis

logger = logging.getLogger(__name__)

KEY_PREFIX = "agentdesk:llmrl"
# A run parked by a limit has this kind of input request (beat resumes it with no observation).
INPUT_REQUEST_KIND = PROVIDER_RATE_LIMIT_WAIT
WINDOW_SECONDS = 60
LimitName = Literal["requests_per_minute", "tokens_per_minute"]

# KEYS: the window's request and token counters. ARGV: the request limit, the token limit (0 =
# none), the counters' TTL, the tokens to reserve. Returns 0 when the call is allowed (counted and
# its tokens reserved), 1 when the request limit refuses it, 2 when the token limit does.
_ACQUIRE = """
local requests = tonumber(ARGV[1])
local tokens = tonumber(ARGV[2])
local reserve = tonumber(ARGV[4])
if tokens > 0 then
  local used = tonumber(redis.call('GET', KEYS[2]) or '0')
  if used >= tokens or (used > 0 and used + reserve > tokens) then
    return 2
  end
end
if requests > 0 then
  if tonumber(redis.call('GET', KEYS[1]) or '0') >= requests then
    return 1
  end
  if redis.call('INCR', KEYS[1]) == 1 then
    redis.call('EXPIRE', KEYS[1], ARGV[3])
  end
end
if tokens > 0 and reserve > 0 then
  if redis.call('INCRBY', KEYS[2], reserve) == reserve then
    redis.call('EXPIRE', KEYS[2], ARGV[3])
  end
end
return 0
"""

# KEYS[1]: the token counter of the reservation's window; ARGV[1]: used minus reserved. A window
# that has expired meanwhile is left alone (INCRBY would create it without a TTL).
_SETTLE = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  return redis.call('INCRBY', KEYS[1], ARGV[1])
end
return 0
"""


@dataclass(frozen=True, slots=True)
class ProviderLimits:
    """The limits of one provider row (the runs that use it share them)."""

    provider_id: uuid.UUID
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None

    @property
    def any(self) -> bool:
        return bool(self.requests_per_minute or self.tokens_per_minute)


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a model call may not go out now, and when it may."""

    limit: LimitName
    value: int
    retry_at: float  # Unix time: the end of the full window

    def describe(self, provider: str) -> str:
        unit = "requests" if self.limit == "requests_per_minute" else "tokens"
        return f"the {provider} provider's limit of {self.value} {unit} per minute is reached"


@dataclass(frozen=True, slots=True)
class Slot:
    """A call let through: its window and the tokens reserved for it there (see settle)."""

    window: int
    tokens: int


def _window(at: float) -> int:
    return int(at // WINDOW_SECONDS) * WINDOW_SECONDS


def _key(provider_id: uuid.UUID, counter: str, window: int) -> str:
    return f"{KEY_PREFIX}:{provider_id}:{counter}:{window}"


def acquire(
    limits: ProviderLimits | None, *, tokens: int = 0, now: float | None = None
) -> Refusal | Slot | None:
    """Count one model call against ``limits`` and reserve ``tokens`` for it: its :class:`Slot`,
    a :class:`Refusal` if a limit is reached, or None (no limits, or Redis unreachable).

    ``now`` (a Unix time) exists for tests of the window arithmetic; callers leave it out.
    """
    if limits is None or not limits.any:
        return None
    at = time.time() if now is None else now
    window = _window(at)
    reserve = max(tokens, 0) if limits.tokens_per_minute else 0
    try:
        refused = int(
            get_redis().register_script(_ACQUIRE)(
                keys=[
                    _key(limits.provider_id, "requests", window),
                    _key(limits.provider_id, "tokens", window),
                ],
                args=[
                    limits.requests_per_minute or 0,
                    limits.tokens_per_minute or 0,
                    WINDOW_SECONDS + 5,
                    reserve,
                ],
            )
        )
    except redis.RedisError as exc:
        logger.warning(
            "provider %s: its rate limits cannot be kept (Redis: %s); the call goes out",
            limits.provider_id,
            exc,
        )
        return None
    if refused == 0:
        return Slot(window=window, tokens=reserve)
    name: LimitName = "requests_per_minute" if refused == 1 else "tokens_per_minute"
    value = (limits.requests_per_minute if refused == 1 else limits.tokens_per_minute) or 0
    return Refusal(limit=name, value=value, retry_at=window + WINDOW_SECONDS)


def settle(limits: ProviderLimits | None, slot: Slot | None, used: int) -> None:
    """The call of ``slot`` used ``used`` tokens: replace its reservation with them."""
    if limits is None or not limits.tokens_per_minute or slot is None or used == slot.tokens:
        return
    try:
        get_redis().register_script(_SETTLE)(
            keys=[_key(limits.provider_id, "tokens", slot.window)], args=[used - slot.tokens]
        )
    except redis.RedisError as exc:  # the window then keeps the reservation: on the safe side
        logger.warning("provider %s: tokens not counted (Redis: %s)", limits.provider_id, exc)
