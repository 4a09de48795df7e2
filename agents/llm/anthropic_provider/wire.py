"""Anthropic Messages: our messages and tools in the wire's shapes, and its replies read back
into ours."""

from __future__ import annotations

import json

from anthropic.types import (
    MessageDeltaUsage,
    MessageParam,
    TextBlockParam,
    ToolParam,
    ToolResultBlockParam,
    ToolUseBlockParam,
)
from anthropic.types import Usage as AnthropicUsage

from agents.llm.retry import malformed_response
from agents.llm.types import (
    Message,
    StopReason,
    ToolCall,
    ToolDefinition,
    Usage,
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


def usage_from_anthropic(usage: AnthropicUsage | MessageDeltaUsage | None, base: Usage) -> Usage:
    """Counts from `usage`, falling back to `base` where a stream's delta leaves one out."""
    if usage is None:
        return base
    input_tokens = usage.input_tokens
    read = usage.cache_read_input_tokens
    written = usage.cache_creation_input_tokens
    return Usage(
        input_tokens=base.input_tokens if input_tokens is None else input_tokens,
        output_tokens=base.output_tokens if usage.output_tokens is None else usage.output_tokens,
        cache_read_tokens=base.cache_read_tokens if read is None else read,
        cache_write_tokens=base.cache_write_tokens if written is None else written,
    )


def tool_call_from_input(*, id: str, name: str, tool_input: object) -> ToolCall:
    # Through the same checks as OpenAI's JSON text: the SDK's reader accepted NaN and NUL,
    # which the arguments may not carry (ToolCall.from_raw).
    raw = tool_input if isinstance(tool_input, str) else json.dumps(tool_input)
    return ToolCall.from_raw(id=id, name=name, raw_arguments=raw)


def stop_reason(raw: str | None, tool_calls: tuple[ToolCall, ...]) -> StopReason:
    reason = _STOP_REASONS.get(raw or "", "other")
    # A reply cut off by the token limit says so even when it carries tool calls: the last
    # call's input is then most likely incomplete.
    if reason == "max_tokens":
        return reason
    return "tool_calls" if tool_calls else reason


def tool_name(name: object, *, position: int) -> str:
    if not name or not isinstance(name, str):
        raise malformed_response(
            provider="anthropic", detail=f"tool_use block {position} has no name"
        )
    return name


def check_tool_calls_present(raw: str | None, calls: tuple[ToolCall, ...]) -> None:
    # The reply's tool_use blocks were lost on the way: finishing the run on its (empty) text
    # would report an answer the model never gave.
    if raw == "tool_use" and not calls:
        raise malformed_response(
            provider="anthropic", detail="stop_reason is 'tool_use' but no tool_use block came"
        )
