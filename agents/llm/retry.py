"""Retry decisions shared by the providers.

The SDKs' own retries are switched off (max_retries=0 on the clients): their backoff constants are
not configurable, they would retry a stream we already started forwarding, and we want one typed
failure naming the attempts. Here the backoff base is a config value, so tests use a tiny one.
"""

from __future__ import annotations

import email.utils
import math
import random
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from agents.llm.errors import (
    LLMBadRequest,
    LLMConfigurationError,
    LLMError,
    LLMRateLimited,
    LLMUnavailable,
)
from agents.llm.types import ProviderConfig


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds the server asked us to wait: `retry-after-ms`, else `retry-after` (seconds, date)."""
    if headers is None:
        return None
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / divisor
        except ValueError:
            continue
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def backoff_delay(config: ProviderConfig, *, attempt: int, retry_after: float | None) -> float:
    """Delay before attempt `attempt + 1`. Retry-After wins (capped); else jittered exponential."""
    if retry_after is not None:
        return min(retry_after, config.retry_after_cap)
    exponential = min(config.backoff_base * (2 ** (attempt - 1)), config.backoff_max)
    # Jitter spreads the retries of many concurrent executions hitting the same limit.
    return exponential * (1 - 0.25 * random.random())  # noqa: S311 - not cryptographic


def error_for_status(
    status: int,
    detail: str,
    *,
    provider: str,
    retry_after: float | None,
) -> LLMError:
    """The typed error for an HTTP status from the provider."""
    if status in (401, 403):
        return LLMConfigurationError(
            f"The {provider} provider rejected the API key (HTTP {status}): {detail}. "
            "Check the key on the agency's LLM provider in admin or in the environment.",
            provider=provider,
            status_code=status,
        )
    if status == 429:
        return LLMRateLimited(
            f"The {provider} provider is rate limiting requests (HTTP 429): {detail}",
            provider=provider,
            status_code=status,
            retry_after=retry_after,
        )
    if status in (408, 409) or status >= 500:
        return LLMUnavailable(
            f"The {provider} provider failed (HTTP {status}): {detail}",
            provider=provider,
            status_code=status,
            retry_after=retry_after,
        )
    return LLMBadRequest(
        f"The {provider} provider refused the request (HTTP {status}): {detail}",
        provider=provider,
        status_code=status,
    )


def timeout_error(*, provider: str, timeout: float) -> LLMUnavailable:
    return LLMUnavailable(
        f"The {provider} provider did not answer within {timeout:g} s", provider=provider
    )


def connection_error(*, provider: str, base_url: str, detail: str) -> LLMUnavailable:
    return LLMUnavailable(
        f"Could not reach the {provider} provider at {base_url}: {detail}", provider=provider
    )


def malformed_response(*, provider: str, detail: str) -> LLMUnavailable:
    """A 200 whose body breaks the wire format (no choices, a tool call without a name...): a
    broken or overloaded server more often than not, so retried like an outage."""
    return LLMUnavailable(
        f"The {provider} provider sent a malformed response: {detail}", provider=provider
    )


def stream_ended_early(*, provider: str, detail: str) -> LLMUnavailable:
    """A stream that stopped before its final event: the reply may be cut anywhere, so it is not
    a reply at all."""
    return LLMUnavailable(
        f"The {provider} provider's stream ended early: {detail}", provider=provider
    )


@contextmanager
def reading_response(provider: str) -> Iterator[None]:
    """Around the reading of a response. The SDKs build their models without validating them
    (a missing field becomes None, a wrong type stays), so a shape the providers do not check
    for would surface as an AttributeError or a TypeError: a malformed response instead."""
    try:
        yield
    except (AttributeError, TypeError, KeyError, IndexError) as exc:
        raise malformed_response(provider=provider, detail=f"{type(exc).__name__}: {exc}") from exc
