"""The Anthropic Messages provider."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import anthropic

from agents.llm.anthropic_provider.stream import StreamState
from agents.llm.anthropic_provider.wire import (
    check_tool_calls_present,
    stop_reason,
    to_anthropic_messages,
    to_anthropic_tools,
    tool_call_from_input,
    tool_name,
    usage_from_anthropic,
)
from agents.llm.base import CompletionRequest, Provider, Sleep
from agents.llm.endpoints import http_client, refuse_environment_headers
from agents.llm.errors import LLMError, LLMUnavailable
from agents.llm.retry import (
    connection_error,
    error_for_status,
    malformed_response,
    parse_retry_after,
    reading_response,
    stream_ended_early,
    timeout_error,
)
from agents.llm.types import (
    Completion,
    ProviderConfig,
    StreamDone,
    StreamEvent,
    Usage,
    UsageUpdate,
    unique_call_id,
)

# An error event inside a 200 stream carries no HTTP status; its type says which one it stands for.
_STREAM_ERROR_STATUS = {"rate_limit_error": 429, "overloaded_error": 529, "api_error": 500}


class AnthropicProvider(Provider):
    kind = "anthropic"

    def __init__(self, config: ProviderConfig, *, api_key: str, sleep: Sleep = time.sleep) -> None:
        super().__init__(config, api_key=api_key, sleep=sleep)
        if config.base_url is not None:  # an agency's endpoint: not the platform's headers
            refuse_environment_headers("ANTHROPIC_CUSTOM_HEADERS")
        self._client = anthropic.Anthropic(
            api_key=api_key,
            base_url=config.base_url,
            timeout=config.timeout,
            max_retries=0,
            http_client=http_client(anthropic.DefaultHttpxClient, config.base_url),
        )

    def close(self) -> None:
        self._client.close()

    def _create_kwargs(self, request: CompletionRequest) -> dict[str, Any]:
        system, messages = to_anthropic_messages(request.messages)
        kwargs: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": messages,
        }
        if system is not None:
            kwargs["system"] = system
        if request.tools:
            kwargs["tools"] = to_anthropic_tools(request.tools)
        # The Messages API of the SDK we pin (anthropic 2.x) has no sampling parameters any more:
        # an agent's temperature applies to OpenAI-format providers only.
        return kwargs

    def _complete_once(self, request: CompletionRequest, attempt: int) -> Completion:
        response = self._client.messages.create(
            **self._create_kwargs(request), timeout=request.attempt_timeout(self.config.timeout)
        )
        with reading_response(self.kind):
            return self._completion(response, request, attempt)

    def _completion(
        self, response: anthropic.types.Message, request: CompletionRequest, attempt: int
    ) -> Completion:
        if response.content is None:
            raise malformed_response(provider=self.kind, detail="the message has no content")
        text = "".join(block.text or "" for block in response.content if block.type == "text")
        ids: set[str] = set()
        calls = tuple(
            tool_call_from_input(
                id=unique_call_id(block.id, ids),
                name=tool_name(block.name, position=position),
                tool_input=block.input,
            )
            for position, block in enumerate(response.content)
            if block.type == "tool_use"
        )
        check_tool_calls_present(response.stop_reason, calls)
        return Completion(
            text=text,
            tool_calls=calls,
            usage=usage_from_anthropic(response.usage, Usage()),
            stop_reason=stop_reason(response.stop_reason, calls),
            raw_stop_reason=response.stop_reason,
            model=response.model,
            provider="anthropic",
            raw=response.model_dump(mode="json", warnings=False),
            latency_ms=self.elapsed_ms(request),
            attempts=attempt,
        )

    def _stream_once(self, request: CompletionRequest, attempt: int) -> Iterator[StreamEvent]:
        state = StreamState(model=request.model)
        create = self._client.messages.create
        with (
            create(
                **self._create_kwargs(request),
                stream=True,
                timeout=request.attempt_timeout(self.config.timeout),
            ) as events,
            reading_response(self.kind),
        ):
            for event in events:
                if event.type == "message_start":
                    state.response_id, state.model = event.message.id, event.message.model
                    state.add_usage(event.message.usage, replace=True)
                    yield UsageUpdate(state.usage)
                elif event.type == "content_block_start":
                    yield from state.start_block(event)
                elif event.type == "content_block_delta":
                    yield from state.block_delta(event)
                elif event.type == "content_block_stop":
                    yield from state.stop_block(event.index)
                elif event.type == "message_delta":
                    state.stop_reason = event.delta.stop_reason
                    state.add_usage(event.usage)
                    yield UsageUpdate(state.usage)
                elif event.type == "message_stop":
                    state.stopped = True
        # The SDK's iteration ends alike after message_stop and when the body just stops.
        if not state.stopped:
            raise stream_ended_early(provider=self.kind, detail="no message_stop event")
        if len(state.calls) < len(state.tool_blocks):
            raise malformed_response(provider=self.kind, detail="a tool_use block never closed")
        calls = tuple(state.calls)
        check_tool_calls_present(state.stop_reason, calls)
        yield StreamDone(
            Completion(
                text="".join(state.text),
                tool_calls=calls,
                usage=state.usage,
                stop_reason=stop_reason(state.stop_reason, calls),
                raw_stop_reason=state.stop_reason,
                model=state.model,
                provider="anthropic",
                raw=state.raw(),
                latency_ms=self.elapsed_ms(request),
                attempts=attempt,
            )
        )

    def _classify(self, exc: Exception) -> LLMError | None:
        if isinstance(exc, anthropic.APITimeoutError):
            return timeout_error(provider=self.kind, timeout=self.config.timeout)
        if isinstance(exc, anthropic.APIConnectionError):
            where = self.config.base_url or "api.anthropic.com"
            return connection_error(provider=self.kind, base_url=where, detail=str(exc))
        if isinstance(exc, anthropic.APIStatusError):
            body = exc.body if isinstance(exc.body, dict) else {}
            inner = body.get("error")
            error: dict[str, Any] = inner if isinstance(inner, dict) else {}
            detail = str(error.get("message") or exc.message)
            status = exc.status_code
            if status < 400:
                status = _STREAM_ERROR_STATUS.get(str(error.get("type")), 500)
            retry_after = parse_retry_after(exc.response.headers)
            return error_for_status(status, detail, provider=self.kind, retry_after=retry_after)
        if isinstance(exc, anthropic.AnthropicError):
            return LLMUnavailable(f"The anthropic provider failed: {exc}", provider=self.kind)
        if isinstance(exc, json.JSONDecodeError):
            return LLMUnavailable(
                f"The anthropic provider sent a response that is not JSON: {exc}",
                provider=self.kind,
            )
        return None
