"""OpenAI Chat Completions: our messages and tools in the wire's shapes, and its replies read back
into ours."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from openai.types import CompletionUsage
from openai.types.chat import (
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCallParam,
    ChatCompletionMessageParam,
)

from agents.llm.retry import malformed_response
from agents.llm.types import (
    Message,
    StopReason,
    ToolCall,
    ToolDefinition,
    Usage,
    unique_call_id,
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
        input_tokens=max((usage.prompt_tokens or 0) - cached - written, 0),
        output_tokens=usage.completion_tokens or 0,
        cache_read_tokens=cached,
        cache_write_tokens=written,
    )


def stop_reason(finish_reason: str | None, tool_calls: tuple[ToolCall, ...]) -> StopReason:
    reason = _STOP_REASONS.get(finish_reason or "", "other")
    # A reply cut off by the token limit says so even when it carries tool calls: the last
    # call's arguments are then most likely incomplete.
    if reason == "max_tokens":
        return reason
    # Some local servers report "stop" next to tool calls; the calls are what matters.
    return "tool_calls" if tool_calls else reason


def tool_calls_from_openai(calls: Iterable[Any], *, provider: str) -> tuple[ToolCall, ...]:
    """The reply's function calls, as OpenAI-compatible servers really send them: `type` may be
    missing, `id` missing, empty or repeated, `arguments` an object instead of a string."""
    result: list[ToolCall] = []
    ids: set[str] = set()
    for index, call in enumerate(calls):
        function = getattr(call, "function", None)  # a custom-tool call has none: never offered
        name = getattr(function, "name", None)
        if not name or not isinstance(name, str):
            raise malformed_response(
                provider=provider, detail=f"tool call {index} has no function name"
            )
        result.append(
            ToolCall.from_raw(
                id=unique_call_id(getattr(call, "id", None), ids),
                name=name,
                raw_arguments=getattr(function, "arguments", None),
            )
        )
    return tuple(result)


def check_tool_calls_present(
    finish_reason: str | None, calls: tuple[ToolCall, ...], *, provider: str
) -> None:
    # The reply's calls were lost on the way: finishing the run on its (empty) text would
    # report an answer the model never gave.
    if finish_reason in ("tool_calls", "function_call") and not calls:
        raise malformed_response(
            provider=provider, detail=f"finish_reason is {finish_reason!r} but no tool call came"
        )
