"""The provider interface the runtime calls, with the retry loop every provider shares."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import NoReturn

from agents.llm.before_send import before_send as gate_before_send
from agents.llm.before_send import hook_seconds
from agents.llm.deadline import call_deadline
from agents.llm.endpoints import refusal
from agents.llm.errors import LLMConfigurationError, LLMDeadlineExceeded, LLMError
from agents.llm.retry import backoff_delay, stream_ended_early
from agents.llm.types import (
    Completion,
    Message,
    ProviderConfig,
    ProviderKind,
    StreamDone,
    StreamEvent,
    TextDelta,
    ToolDefinition,
    UsageUpdate,
)

Sleep = Callable[[float], None]


@dataclass(frozen=True, slots=True)
class CompletionRequest:
    messages: tuple[Message, ...]
    tools: tuple[ToolDefinition, ...]
    model: str
    temperature: float | None
    max_tokens: int
    started: float  # time.monotonic() when the caller asked; latency counts the retries too
    deadline: float | None = None  # time.monotonic() by which the whole call must be over

    def attempt_timeout(self, configured: float) -> float:
        """An attempt's HTTP timeout: the configured one, shortened to the time left."""
        if self.deadline is None:
            return configured
        return max(0.001, min(configured, self.deadline - time.monotonic()))


class Provider(ABC):
    """One configured model endpoint. Thread-safe: one instance serves concurrent executions."""

    kind: ProviderKind

    def __init__(self, config: ProviderConfig, *, api_key: str, sleep: Sleep = time.sleep) -> None:
        self.config = config
        self._api_key = api_key
        self._sleep = sleep

    def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        *,
        model: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        timeout: float | None = None,
        before_send: Callable[[], None] | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> Completion:
        """One model turn with the tools offered. Raises only `LLMError` subclasses, or what
        ``before_send`` or ``on_text`` raised.

        ``timeout``: the seconds the caller has left for the call, retries and backoff
        included: each attempt's HTTP timeouts (connect, each read) are shortened to the time
        left and no retry starts past it, so a hung or unreachable provider ends the call then
        with `LLMDeadlineExceeded`. On an agency's own endpoint every network operation is
        also cut at the limit (:mod:`agents.llm.deadline`), so not even a server that keeps
        sending a byte now and then can stretch a call past it.

        ``before_send``: run once, on this thread, when the first request is built and before
        it goes out (:mod:`agents.llm.before_send`); what it raises ends the call unchanged.

        ``on_text``: the call is streamed, and the reply's text is passed to it piece by piece
        as it arrives (on this thread). The result, the retries and the errors are the same as
        without it: the `Completion` is the stream's whole reply, never a partial one, and a
        failure is retried as it would be unstreamed, also after text went out (unlike
        `stream`) — that retry is made unstreamed, so no text is passed twice; what was passed
        of the failed attempt is void (the caller's to say so, if it must).
        """
        request = self._request(messages, tools, model, temperature, max_tokens, timeout=timeout)
        attempt = 1
        passed = _Passed(on_text)
        with gate_before_send(before_send) as gate:
            while True:
                try:
                    with call_deadline(request.deadline):
                        if passed.to is not None and not passed.any:
                            return self._streamed_once(request, attempt, passed)
                        return self._complete_once(request, attempt)
                except Exception as exc:
                    if gate.failure is not None:
                        failure = gate.failure  # the caller's own exception, with its cause
                        raise failure from failure.__cause__
                    error = self._error_for(exc)
                    if error is None:
                        raise
                    self._retry_or_raise(error, exc, attempt, request)
                attempt += 1

    def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        *,
        model: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        timeout: float | None = None,
    ) -> Iterator[StreamEvent]:
        """Deltas as they arrive, then a `StreamDone` carrying the whole `Completion`.

        A failure before the reply's first text or tool-call event is retried like `complete`;
        after one went out to the caller, a failure raises at once (a retry would replay text the
        caller already forwarded). A stream that ends before the provider's final event raises
        `LLMUnavailable` ("stream ended early"), never a `StreamDone` with a partial reply.
        """
        request = self._request(messages, tools, model, temperature, max_tokens, timeout=timeout)
        attempt = 1
        while True:
            forwarded = False
            # Usage alone (Anthropic's message_start) is held back until the reply's content
            # starts: a failure right after it is still retried, and the caller never sees an
            # abandoned attempt's counts.
            held: UsageUpdate | None = None
            try:
                # (The limit stays set while the caller handles an event: same thread.)
                with call_deadline(request.deadline):
                    for event in self._stream_once(request, attempt):
                        if isinstance(event, UsageUpdate) and not forwarded:
                            held = event
                            continue
                        if held is not None:
                            yield held
                            held = None
                        forwarded = True
                        yield event
                return
            except Exception as exc:
                error = self._error_for(exc)
                if error is None:
                    raise
                if forwarded:
                    error.attempts = attempt
                    _raise(error, exc)
                self._retry_or_raise(error, exc, attempt, request)
            attempt += 1

    def _streamed_once(
        self, request: CompletionRequest, attempt: int, passed: _Passed
    ) -> Completion:
        """One streamed attempt of `complete`: its text to ``passed``, its whole reply back."""
        events = self._stream_once(request, attempt)
        try:
            for event in events:
                if isinstance(event, TextDelta):
                    passed.text(event.text)
                elif isinstance(event, StreamDone):
                    return event.completion
        finally:
            # The generator's response is released now, not when it is collected.
            close = getattr(events, "close", None)
            if close is not None:
                close()
        # Each provider's stream ends with a StreamDone or raises (stream_ended_early).
        raise stream_ended_early(provider=self.kind, detail="no final event")

    def close(self) -> None:  # noqa: B027 - optional hook, most providers hold nothing to close
        """Release the HTTP connection pool."""

    def _request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        model: str | None,
        temperature: float | None,
        max_tokens: int | None,
        *,
        timeout: float | None,
    ) -> CompletionRequest:
        started = time.monotonic()
        return CompletionRequest(
            messages=tuple(messages),
            tools=tuple(tools),
            model=model or self.config.model,
            temperature=temperature,
            max_tokens=max_tokens or self.config.default_max_tokens,
            started=started,
            deadline=None if timeout is None else started + timeout,
        )

    def _retry_or_raise(
        self, error: LLMError, cause: Exception, attempt: int, request: CompletionRequest
    ) -> None:
        error.attempts = attempt
        if not error.retryable:
            _raise(error, cause)
        last = attempt > self.config.max_retries
        delay = (
            0.0
            if last
            else backoff_delay(self.config, attempt=attempt, retry_after=error.retry_after)
        )
        if request.deadline is not None and time.monotonic() + delay >= request.deadline:
            # Out of time (an attempt cut short to fit, or no room for the next one): the
            # caller's limit ended the call, not the provider.
            late = LLMDeadlineExceeded(
                f"The {self.kind} provider's answer did not come within the time the run had "
                f"left ({request.deadline - request.started:.3g} s); last error: {error}",
                provider=self.kind,
                attempts=attempt,
            )
            _raise(late, cause)
        if last:
            _raise(error, cause)
        self._sleep(delay)

    @staticmethod
    def elapsed_ms(request: CompletionRequest) -> float:
        """The call's latency so far: without the caller's ``before_send`` hook's time."""
        return (time.monotonic() - request.started - hook_seconds()) * 1000

    @abstractmethod
    def _complete_once(self, request: CompletionRequest, attempt: int) -> Completion: ...

    @abstractmethod
    def _stream_once(self, request: CompletionRequest, attempt: int) -> Iterator[StreamEvent]: ...

    def _error_for(self, exc: Exception) -> LLMError | None:
        if isinstance(exc, LLMError):  # the provider's own verdict on the response
            return exc
        refused = refusal(exc)  # the agency's endpoint is not an allowed address: not retried
        if refused is not None:
            return LLMConfigurationError(str(refused), provider=self.kind)
        return self._classify(exc)

    @abstractmethod
    def _classify(self, exc: Exception) -> LLMError | None:
        """The typed error for an SDK exception, or None to let an unexpected exception through."""


class _Passed:
    """Where a streamed `complete` passes its text, and whether any went there yet."""

    __slots__ = ("any", "to")

    def __init__(self, to: Callable[[str], None] | None) -> None:
        self.to = to
        self.any = False

    def text(self, text: str) -> None:
        if text and self.to is not None:
            self.any = True
            self.to(text)


def _raise(error: LLMError, cause: Exception) -> NoReturn:
    if error is cause:
        raise error
    raise error from cause
