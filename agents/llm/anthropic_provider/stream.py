"""Anthropic Messages: a streamed reply reassembled from its events."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from anthropic.types import (
    MessageDeltaUsage,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
)
from anthropic.types import Usage as AnthropicUsage

from agents.llm.anthropic_provider.wire import (
    tool_call_from_input,
    tool_name,
    usage_from_anthropic,
)
from agents.llm.types import (
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallComplete,
    ToolCallDelta,
    Usage,
    unique_call_id,
)


@dataclass
class StreamState:
    response_id: str = ""
    model: str = ""
    usage: Usage = field(default_factory=Usage)
    raw_usage: dict[str, Any] = field(default_factory=dict)
    text: list[str] = field(default_factory=list)
    # content block index -> (ordinal among the tool calls, id, name, input of the start event,
    # input_json_delta pieces)
    tool_blocks: dict[int, tuple[int, str, str, object, list[str]]] = field(default_factory=dict)
    ids: set[str] = field(default_factory=set)
    calls: list[ToolCall] = field(default_factory=list)
    stop_reason: str | None = None
    stopped: bool = False  # message_stop came: the stream is whole

    def add_usage(
        self, usage: AnthropicUsage | MessageDeltaUsage | None, *, replace: bool = False
    ) -> None:
        self.usage = usage_from_anthropic(usage, self.usage)
        if usage is None:
            return
        if replace:  # message_start: the whole usage; message_delta: what changed
            self.raw_usage = usage.model_dump(mode="json")
        else:
            self.raw_usage.update(usage.model_dump(mode="json", exclude_none=True))

    def start_block(self, event: RawContentBlockStartEvent) -> Iterator[StreamEvent]:
        block = event.content_block
        if block.type == "text" and block.text:
            self.text.append(block.text)
            yield TextDelta(block.text)
        elif block.type == "tool_use":
            ordinal = len(self.tool_blocks)
            call_id = unique_call_id(block.id, self.ids)
            name = tool_name(block.name, position=event.index)
            self.tool_blocks[event.index] = (ordinal, call_id, name, block.input, [])
            yield ToolCallDelta(ordinal, call_id, name, "")

    def block_delta(self, event: RawContentBlockDeltaEvent) -> Iterator[StreamEvent]:
        delta = event.delta
        if delta.type == "text_delta" and delta.text:
            self.text.append(delta.text)
            yield TextDelta(delta.text)
        elif delta.type == "input_json_delta" and event.index in self.tool_blocks:
            ordinal, _, _, _, parts = self.tool_blocks[event.index]
            parts.append(delta.partial_json or "")
            yield ToolCallDelta(ordinal, None, None, delta.partial_json or "")

    def stop_block(self, index: int) -> Iterator[StreamEvent]:
        if index not in self.tool_blocks:
            return
        ordinal, call_id, name, start_input, parts = self.tool_blocks[index]
        # The API streams the input as JSON pieces after an empty start; some compatible
        # gateways put the whole input in the start event instead.
        if parts or not start_input:
            call = ToolCall.from_raw(id=call_id, name=name, raw_arguments="".join(parts))
        else:
            call = tool_call_from_input(id=call_id, name=name, tool_input=start_input)
        self.calls.append(call)
        yield ToolCallComplete(ordinal, call)

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
