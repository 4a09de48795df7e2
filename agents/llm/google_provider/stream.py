"""Gemini: a streamed reply (``streamGenerateContent?alt=sse``) reassembled from its chunks.

Each chunk is a whole ``GenerateContentResponse``: text parts carry the next piece of text, a
functionCall part carries a whole call (Gemini does not stream a call's arguments unless asked
to), ``usageMetadata`` is the running total so far, and the last chunk has the candidate's
``finishReason``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from google.genai import types

from agents.llm.google_provider.wire import (
    finish_reason_name,
    reply_parts,
    tool_call_from_part,
    usage_from_google,
)
from agents.llm.types import (
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallComplete,
    ToolCallDelta,
    Usage,
    UsageUpdate,
)


@dataclass
class StreamState:
    response_id: str = ""
    model: str = ""
    usage: Usage = field(default_factory=Usage)
    raw_usage: dict[str, Any] | None = None
    text: list[str] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)
    calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    block_reason: str | None = None  # the prompt was refused: no candidate comes

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None or self.block_reason is not None

    def add_chunk(self, chunk: types.GenerateContentResponse) -> Iterator[StreamEvent]:
        self.response_id = chunk.response_id or self.response_id
        self.model = chunk.model_version or self.model
        if chunk.prompt_feedback is not None and chunk.prompt_feedback.block_reason is not None:
            self.block_reason = finish_reason_name(chunk.prompt_feedback.block_reason)
        candidate = chunk.candidates[0] if chunk.candidates else None
        for part in reply_parts(candidate):
            if part.text and not part.thought:
                self.text.append(part.text)
                yield TextDelta(part.text)
            elif part.function_call is not None:
                index = len(self.calls)
                call = tool_call_from_part(part.function_call, ids=self.ids, position=index)
                self.calls.append(call)
                yield ToolCallDelta(index, call.id, call.name, call.raw_arguments)
                yield ToolCallComplete(index, call)
        if chunk.usage_metadata is not None:
            self.usage = usage_from_google(chunk.usage_metadata)
            self.raw_usage = chunk.usage_metadata.model_dump(
                mode="json", by_alias=True, exclude_none=True
            )
            yield UsageUpdate(self.usage)
        if candidate is not None and candidate.finish_reason is not None:
            self.finish_reason = finish_reason_name(candidate.finish_reason)

    def raw(self) -> dict[str, Any]:
        parts: list[dict[str, Any]] = []
        if self.text:
            parts.append({"text": "".join(self.text)})
        for call in self.calls:
            parts.append(
                {"functionCall": {"id": call.id, "name": call.name, "args": call.arguments}}
            )
        raw: dict[str, Any] = {
            "responseId": self.response_id,
            "modelVersion": self.model,
            "candidates": [
                {
                    "content": {"role": "model", "parts": parts},
                    "finishReason": self.finish_reason,
                    "index": 0,
                }
            ],
            "usageMetadata": self.raw_usage,
        }
        if self.block_reason is not None:
            raw["promptFeedback"] = {"blockReason": self.block_reason}
            raw["candidates"] = []
        return raw
