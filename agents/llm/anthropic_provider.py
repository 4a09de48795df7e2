"""Anthropic Messages: system prompt as `system=`, tool_use / tool_result blocks, cache tokens."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anthropic
from anthropic.types import (
    MessageDeltaUsage,
    MessageParam,
    TextBlockParam,
    ToolParam,
    ToolResultBlockParam,
    ToolUseBlockParam,
)
from anthropic.types import Usage as AnthropicUsage

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

Block = TextBlockParam | ToolUseBlockParam | ToolResultBlockParam

_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end",
    "stop_sequence": "end",
    "tool_use": "tool_calls",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "refusal": "refusal",
}
# An error event inside a 200 stream carries no HTTP status; its type says which one it stands for.
_STREAM_ERROR_STATUS = {"rate_limit_error": 429, "overloaded_error": 529, "api_error": 500}


def _blocks(message: Message) -> list[Block]:
    if message.role == "tool":
        result: ToolResultBlockParam = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id or "",
            "content": message.content,
        }
        if message.is_error:
            result["is_error"] = True
        return [result]
    # Anthropic refuses empty text blocks.
    blocks: list[Block] = [{"type": "text", "text": message.content}] if message.content else []
    for call in message.tool_calls:
        # The API takes an object here; a malformed call is replayed as {} next to its error result.
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        )
    return blocks


def to_anthropic_messages(messages: tuple[Message, ...]) -> tuple[str | None, list[MessageParam]]:
    """(system prompt, messages). Tool results become user turns; consecutive turns of one role are
    merged, since all results answering one assistant turn must arrive in one user message."""
    system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
    turns: list[tuple[str, list[Block]]] = []
    for message in messages:
        if message.role == "system":
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if not blocks:
            continue
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, blocks))
    params: list[MessageParam] = [
        {"role": "assistant", "content": blocks}
        if role == "assistant"
        else {"role": "user", "content": blocks}
        for role, blocks in turns
    ]
    return system or None, params


def to_anthropic_tools(tools: tuple[ToolDefinition, ...]) -> list[ToolParam]:
    return [
        {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
        for tool in tools
    ]


def usage_from_anthropic(usage: AnthropicUsage | MessageDeltaUsage, base: Usage) -> Usage:
    """Counts from `usage`, falling back to `base` where a stream's delta leaves one out."""
    input_tokens = usage.input_tokens
    read = usage.cache_read_input_tokens
    written = usage.cache_creation_input_tokens
    return Usage(
        input_tokens=base.input_tokens if input_tokens is None else input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=base.cache_read_tokens if read is None else read,
        cache_write_tokens=base.cache_write_tokens if written is None else written,
    )


def tool_call_from_input(*, id: str, name: str, tool_input: object) -> ToolCall:
    if isinstance(tool_input, dict):
        return ToolCall(
            id=id, name=name, arguments=tool_input, raw_arguments=json.dumps(tool_input)
        )
    raw = tool_input if isinstance(tool_input, str) else json.dumps(tool_input)
    return ToolCall.from_raw(id=id, name=name, raw_arguments=raw)


def stop_reason(raw: str | None, tool_calls: tuple[ToolCall, ...]) -> StopReason:
    if tool_calls:
        return "tool_calls"
    return _STOP_REASONS.get(raw or "", "other")


@dataclass
class _StreamState:
    response_id: str = ""
    model: str = ""
    usage: Usage = field(default_factory=Usage)
    raw_usage: dict[str, Any] = field(default_factory=dict)
    text: list[str] = field(default_factory=list)
    tool_blocks: dict[int, tuple[int, str, str, list[str]]] = field(default_factory=dict)
    calls: list[ToolCall] = field(default_factory=list)
    stop_reason: str | None = None

    def raw(self) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if self.text:
            content.append({"type": "text", "text": "".join(self.text)})
        for call in self.calls:
            content.append(
                {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
            )
        return {
            "id": self.response_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": self.stop_reason,
            "usage": self.raw_usage,
        }


class AnthropicProvider(Provider):
    kind = "anthropic"

    def __init__(self, config: ProviderConfig, *, api_key: str, sleep: Sleep = time.sleep) -> None:
        super().__init__(config, api_key=api_key, sleep=sleep)
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
        response = self._client.messages.create(**self._create_kwargs(request))
        text = "".join(block.text for block in response.content if block.type == "text")
        calls = tuple(
            tool_call_from_input(id=block.id, name=block.name, tool_input=block.input)
            for block in response.content
            if block.type == "tool_use"
        )
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
        state = _StreamState(model=request.model)
        with self._client.messages.create(**self._create_kwargs(request), stream=True) as events:
            for event in events:
                if event.type == "message_start":
                    state.response_id, state.model = event.message.id, event.message.model
                    state.usage = usage_from_anthropic(event.message.usage, state.usage)
                    state.raw_usage = event.message.usage.model_dump(mode="json")
                    yield UsageUpdate(state.usage)
                elif event.type == "content_block_start":
                    block = event.content_block
                    if block.type == "text" and block.text:
                        state.text.append(block.text)
                        yield TextDelta(block.text)
                    elif block.type == "tool_use":
                        ordinal = len(state.tool_blocks)
                        state.tool_blocks[event.index] = (ordinal, block.id, block.name, [])
                        yield ToolCallDelta(ordinal, block.id, block.name, "")
                elif event.type == "content_block_delta":
                    delta = event.delta
                    if delta.type == "text_delta":
                        state.text.append(delta.text)
                        yield TextDelta(delta.text)
                    elif delta.type == "input_json_delta" and event.index in state.tool_blocks:
                        ordinal, _, _, parts = state.tool_blocks[event.index]
                        parts.append(delta.partial_json)
                        yield ToolCallDelta(ordinal, None, None, delta.partial_json)
                elif event.type == "content_block_stop" and event.index in state.tool_blocks:
                    ordinal, call_id, name, parts = state.tool_blocks[event.index]
                    call = ToolCall.from_raw(id=call_id, name=name, raw_arguments="".join(parts))
                    state.calls.append(call)
                    yield ToolCallComplete(ordinal, call)
                elif event.type == "message_delta":
                    state.stop_reason = event.delta.stop_reason
                    state.usage = usage_from_anthropic(event.usage, state.usage)
                    state.raw_usage.update(event.usage.model_dump(mode="json", exclude_none=True))
                    yield UsageUpdate(state.usage)
        calls = tuple(state.calls)
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
