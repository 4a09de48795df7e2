"""OpenAI Chat Completions with function calling; with a `base_url`, any OpenAI-compatible server
(Ollama, vLLM, llama.cpp's server): the seed's "Local (Ollama)" provider."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import openai
from openai.types import CompletionUsage
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCallParam,
    ChatCompletionMessageParam,
)

from agents.llm.base import CompletionRequest, Provider, Sleep
from agents.llm.endpoints import http_client
from agents.llm.errors import LLMError, LLMUnavailable
from agents.llm.retry import connection_error, error_for_status, parse_retry_after, timeout_error
from agents.llm.types import (
    Completion,
    Message,
    ProviderConfig,
    StopReason,
    StreamDone,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallComplete,
    ToolCallDelta,
    ToolDefinition,
    Usage,
    UsageUpdate,
)

_STOP_REASONS: dict[str, StopReason] = {
    "stop": "end",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "max_tokens",
    "content_filter": "refusal",
}


def to_openai_messages(messages: tuple[Message, ...]) -> list[ChatCompletionMessageParam]:
    params: list[ChatCompletionMessageParam] = []
    for message in messages:
        if message.role == "system":
            params.append({"role": "system", "content": message.content})
        elif message.role == "user":
            params.append({"role": "user", "content": message.content})
        elif message.role == "tool":
            params.append(
                {
                    "role": "tool",
                    "tool_call_id": message.tool_call_id or "",
                    "content": message.content,
                }
            )
        elif message.tool_calls:
            calls: list[ChatCompletionMessageFunctionToolCallParam] = [
                {
                    "id": call.id,
                    "type": "function",
                    # The model's own text, even when malformed, so it sees what it sent.
                    "function": {"name": call.name, "arguments": call.raw_arguments},
                }
                for call in message.tool_calls
            ]
            params.append(
                {"role": "assistant", "content": message.content or None, "tool_calls": calls}
            )
        else:
            params.append({"role": "assistant", "content": message.content})
    return params


def to_openai_tools(tools: tuple[ToolDefinition, ...]) -> list[ChatCompletionFunctionToolParam]:
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
            },
        }
        for tool in tools
    ]


def usage_from_openai(usage: CompletionUsage | None) -> Usage:
    if usage is None:
        return Usage()
    details = usage.prompt_tokens_details
    cached = (details.cached_tokens or 0) if details else 0
    written = (getattr(details, "cache_write_tokens", None) or 0) if details else 0
    return Usage(
        input_tokens=max(usage.prompt_tokens - cached - written, 0),
        output_tokens=usage.completion_tokens,
        cache_read_tokens=cached,
        cache_write_tokens=written,
    )


def stop_reason(finish_reason: str | None, tool_calls: tuple[ToolCall, ...]) -> StopReason:
    # Some local servers report "stop" next to tool calls; the calls are what matters.
    if tool_calls:
        return "tool_calls"
    return _STOP_REASONS.get(finish_reason or "", "other")


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class _StreamState:
    """Reassembles the chunks into what a non-streamed response would have carried."""

    response_id: str = ""
    model: str = ""
    text: list[str] = field(default_factory=list)
    calls: dict[int, _PartialCall] = field(default_factory=dict)
    completed: dict[int, ToolCall] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: CompletionUsage | None = None

    def finish_calls(self) -> Iterator[ToolCallComplete]:
        for index in sorted(self.calls):
            if index not in self.completed:
                partial = self.calls[index]
                call = ToolCall.from_raw(
                    id=partial.id, name=partial.name, raw_arguments="".join(partial.arguments)
                )
                self.completed[index] = call
                yield ToolCallComplete(index=index, tool_call=call)

    def raw(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) or None}
        if self.completed:
            message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.raw_arguments},
                }
                for _, c in sorted(self.completed.items())
            ]
        return {
            "id": self.response_id,
            "object": "chat.completion",
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason}],
            "usage": self.usage.model_dump(mode="json") if self.usage else None,
        }


class OpenAIProvider(Provider):
    def __init__(self, config: ProviderConfig, *, api_key: str, sleep: Sleep = time.sleep) -> None:
        super().__init__(config, api_key=api_key, sleep=sleep)
        self.kind = config.kind
        self._client = openai.OpenAI(
            api_key=api_key,
            base_url=config.base_url,
            timeout=config.timeout,
            max_retries=0,
            http_client=http_client(openai.DefaultHttpxClient, config.base_url),
        )

    def close(self) -> None:
        self._client.close()

    def _create_kwargs(self, request: CompletionRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": request.model,
            "messages": to_openai_messages(request.messages),
        }
        if request.tools:
            kwargs["tools"] = to_openai_tools(request.tools)
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        # OpenAI deprecated max_tokens for its own models; local servers mostly know only it.
        limit_name = "max_completion_tokens" if self.kind == "openai" else "max_tokens"
        kwargs[limit_name] = request.max_tokens
        return kwargs

    def _post(self, body: dict[str, Any], *, stream: bool = False) -> Any:
        # `chat.completions.create` re-walks the whole message history against the SDK's
        # TypedDicts on every call (O(history), ~18 ms at 100 messages); our body is already in
        # wire shape, so it goes through the client's documented low-level `post`, which keeps
        # the client's auth, base URL, timeouts and error types, and parses into the same models.
        return self._client.post(
            "/chat/completions",
            body=body,
            cast_to=ChatCompletion,
            options={"security": {"bearer_auth": True}},
            stream=stream,
            stream_cls=openai.Stream[ChatCompletionChunk],
        )

    def _complete_once(self, request: CompletionRequest, attempt: int) -> Completion:
        response: ChatCompletion = self._post(self._create_kwargs(request))
        choice = response.choices[0]
        calls = tuple(
            ToolCall.from_raw(id=c.id, name=c.function.name, raw_arguments=c.function.arguments)
            for c in choice.message.tool_calls or ()
            if c.type == "function"
        )
        return Completion(
            text=choice.message.content or "",
            tool_calls=calls,
            usage=usage_from_openai(response.usage),
            stop_reason=stop_reason(choice.finish_reason, calls),
            raw_stop_reason=choice.finish_reason,
            model=response.model,
            provider=self.kind,
            raw=response.model_dump(mode="json", warnings=False),
            latency_ms=self.elapsed_ms(request),
            attempts=attempt,
        )

    def _stream_once(self, request: CompletionRequest, attempt: int) -> Iterator[StreamEvent]:
        body = self._create_kwargs(request)
        body.update(stream=True, stream_options={"include_usage": True})
        chunks: openai.Stream[ChatCompletionChunk] = self._post(body, stream=True)
        state = _StreamState(model=request.model)
        with chunks:
            for chunk in chunks:
                state.response_id = chunk.id or state.response_id
                state.model = chunk.model or state.model
                if chunk.usage is not None:
                    state.usage = chunk.usage
                    yield UsageUpdate(usage_from_openai(chunk.usage))
                for choice in chunk.choices[:1]:
                    delta = choice.delta
                    if delta.content:
                        state.text.append(delta.content)
                        yield TextDelta(delta.content)
                    for call in delta.tool_calls or ():
                        partial = state.calls.setdefault(call.index, _PartialCall())
                        name = call.function.name if call.function else None
                        arguments = (call.function.arguments if call.function else None) or ""
                        partial.id = call.id or partial.id
                        partial.name = name or partial.name
                        partial.arguments.append(arguments)
                        yield ToolCallDelta(call.index, call.id, name, arguments)
                    if choice.finish_reason is not None:
                        state.finish_reason = choice.finish_reason
                        yield from state.finish_calls()
        yield from state.finish_calls()
        calls = tuple(call for _, call in sorted(state.completed.items()))
        yield StreamDone(
            Completion(
                text="".join(state.text),
                tool_calls=calls,
                usage=usage_from_openai(state.usage),
                stop_reason=stop_reason(state.finish_reason, calls),
                raw_stop_reason=state.finish_reason,
                model=state.model,
                provider=self.kind,
                raw=state.raw(),
                latency_ms=self.elapsed_ms(request),
                attempts=attempt,
            )
        )

    def _classify(self, exc: Exception) -> LLMError | None:
        where = self.config.base_url or "api.openai.com"
        if isinstance(exc, openai.APITimeoutError):
            return timeout_error(provider=self.kind, timeout=self.config.timeout)
        if isinstance(exc, openai.APIConnectionError):
            return connection_error(provider=self.kind, base_url=where, detail=str(exc))
        if isinstance(exc, openai.APIStatusError):
            body = exc.body if isinstance(exc.body, dict) else {}
            detail = str(body.get("message") or exc.message)
            retry_after = parse_retry_after(exc.response.headers)
            return error_for_status(
                exc.status_code, detail, provider=self.kind, retry_after=retry_after
            )
        if isinstance(exc, openai.OpenAIError):
            return LLMUnavailable(f"The {self.kind} provider failed: {exc}", provider=self.kind)
        if isinstance(exc, json.JSONDecodeError):
            return LLMUnavailable(
                f"The {self.kind} provider sent a response that is not JSON: {exc}",
                provider=self.kind,
            )
        return None
