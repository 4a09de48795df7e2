"""OpenAI Chat Completions: a streamed reply reassembled from its events."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from openai.types import CompletionUsage
from openai.types.chat.chat_completion_chunk import ChoiceDeltaToolCall

from agents.llm.retry import malformed_response
from agents.llm.types import (
    ToolCall,
    ToolCallComplete,
    ToolCallDelta,
    unique_call_id,
)


@dataclass
class PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class StreamState:
    """Reassembles the chunks into what a non-streamed response would have carried."""

    response_id: str = ""
    model: str = ""
    text: list[str] = field(default_factory=list)
    calls: dict[int, PartialCall] = field(default_factory=dict)
    completed: dict[int, ToolCall] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: CompletionUsage | None = None

    def add_delta(self, call: ChoiceDeltaToolCall) -> ToolCallDelta:
        index: int | None = call.index
        if index is None:  # some servers leave it out: a new id opens a new call
            last = max(self.calls, default=None)
            if last is None:
                index = 0
            elif call.id and self.calls[last].id not in ("", call.id):
                index = last + 1
            else:
                index = last
        partial = self.calls.setdefault(index, PartialCall())
        name = call.function.name if call.function else None
        arguments = (call.function.arguments if call.function else None) or ""
        if not isinstance(arguments, str):  # the whole object at once, from some servers
            arguments = json.dumps(arguments)
        partial.id = call.id or partial.id
        partial.name = name or partial.name
        partial.arguments.append(arguments)
        return ToolCallDelta(index, call.id, name, arguments)

    def finish_calls(self, provider: str) -> Iterator[ToolCallComplete]:
        ids = {call.id for call in self.completed.values()}
        for index in sorted(self.calls):
            if index not in self.completed:
                partial = self.calls[index]
                if not partial.name:
                    raise malformed_response(
                        provider=provider, detail=f"tool call {index} has no function name"
                    )
                call = ToolCall.from_raw(
                    id=unique_call_id(partial.id, ids),
                    name=partial.name,
                    raw_arguments="".join(partial.arguments),
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
