"""An LLM provider's own limits (``LLMProvider.requests_per_minute`` / ``tokens_per_minute``),
kept by every worker together: a provider key is shared by all the agency's runs.

Fixed one-minute windows counted in Redis, per provider row and window start
(``agentdesk:llmrl:<provider>:<requests|tokens>:<window start>``), expiring with the window.
Before a model call, one Lua script checks both counters and counts the request only if both
allow it, so concurrent runs on many workers never exceed the request limit. The tokens a call
used are added when its reply arrives (how many it will use is not known before): a call is
refused once the window's tokens reach the limit, so the last call of a window can overshoot the
token limit by its own size — the same rule providers apply to their own limits.

A refused run is not failed and holds no worker: it parks (``waiting_input``, its input request
says why) until the window ends, and beat's timer check resumes it (agents.tasks). Limits of
None or 0 mean none; without any, Redis is not contacted.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Literal

from tools.ratelimit import get_redis

KEY_PREFIX = "agentdesk:llmrl"
# A run parked by a limit has this kind of input request (beat resumes it with no observation).
INPUT_REQUEST_KIND = "provider_rate_limit"
WINDOW_SECONDS = 60
LimitName = Literal["requests_per_minute", "tokens_per_minute"]

# KEYS: the window's request and token counters. ARGV: the request limit, the token limit (0 =
# none), the counters' TTL. Returns 0 when the request is allowed (and counted), 1 when the
# request limit refuses it, 2 when the token limit does.
_ACQUIRE = """
local requests = tonumber(ARGV[1])
local tokens = tonumber(ARGV[2])
if tokens > 0 and tonumber(redis.call('GET', KEYS[2]) or '0') >= tokens then
  return 2
end
if requests > 0 then
  if tonumber(redis.call('GET', KEYS[1]) or '0') >= requests then
    return 1
  end
  if redis.call('INCR', KEYS[1]) == 1 then
    redis.call('EXPIRE', KEYS[1], ARGV[3])
  end
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


def _window(at: float) -> int:
    return int(at // WINDOW_SECONDS) * WINDOW_SECONDS


def _key(provider_id: uuid.UUID, counter: str, window: int) -> str:
    return f"{KEY_PREFIX}:{provider_id}:{counter}:{window}"


def acquire(limits: ProviderLimits | None, *, now: float | None = None) -> Refusal | None:
    """Count one model request against ``limits``; a :class:`Refusal` if a limit is reached.

    ``now`` (a Unix time) exists for tests of the window arithmetic; callers leave it out.
    """
    if limits is None or not limits.any:
        return None
    at = time.time() if now is None else now
    window = _window(at)
    client = get_redis()
    refused = int(
        client.register_script(_ACQUIRE)(
            keys=[
                _key(limits.provider_id, "requests", window),
                _key(limits.provider_id, "tokens", window),
            ],
            args=[
                limits.requests_per_minute or 0,
                limits.tokens_per_minute or 0,
                WINDOW_SECONDS + 5,
            ],
        )
    )
    if refused == 0:
        return None
    name: LimitName = "requests_per_minute" if refused == 1 else "tokens_per_minute"
    value = (limits.requests_per_minute if refused == 1 else limits.tokens_per_minute) or 0
    return Refusal(limit=name, value=value, retry_at=window + WINDOW_SECONDS)


def count_tokens(limits: ProviderLimits | None, tokens: int, *, now: float | None = None) -> None:
    """Add the tokens a call used to the current window (only if a token limit is set)."""
    if limits is None or not limits.tokens_per_minute or tokens <= 0:
        return
    at = time.time() if now is None else now
    key = _key(limits.provider_id, "tokens", _window(at))
    pipe = get_redis().pipeline(transaction=False)
    pipe.incrby(key, tokens)
    pipe.expire(key, WINDOW_SECONDS + 5)
    pipe.execute()
