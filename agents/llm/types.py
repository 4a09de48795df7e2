"""Provider-neutral values exchanged with the gateway: messages, tools, tool calls, usage, results.

Provider dicts exist only inside the provider modules; everything here is a frozen dataclass, and
the `*Dict` TypedDicts are the JSON shapes persisted in execution steps.
"""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, TypedDict

from agents.llm.errors import (
    LLMBadRequest,
    LLMConfigurationError,
    LLMDeadlineExceeded,
    LLMError,
    LLMRateLimited,
    LLMUnavailable,
)
from core.storable import storable_text, unstorable

__all__ = [
    "Completion",
    "LLMBadRequest",
    "LLMConfigurationError",
    "LLMDeadlineExceeded",
    "LLMError",
    "LLMRateLimited",
    "LLMUnavailable",
    "Message",
    "ProviderConfig",
    "ProviderKind",
    "Role",
    "StopReason",
    "StreamDone",
    "StreamEvent",
    "TextDelta",
    "ToolCall",
    "ToolCallComplete",
    "ToolCallDelta",
    "ToolDefinition",
    "Usage",
    "UsageUpdate",
]

Role = Literal["system", "user", "assistant", "tool"]
ProviderKind = Literal["openai", "anthropic", "openai_compatible", "google"]
# Normalised across providers; the provider's own value is kept in Completion.raw_stop_reason.
StopReason = Literal["end", "tool_calls", "max_tokens", "refusal", "other"]
RawResponse = dict[str, Any]


class ToolCallDict(TypedDict):
    id: str
    name: str
    raw_arguments: str
    arguments_error: NotRequired[str | None]


class MessageDict(TypedDict):
    role: Role
    content: str
    tool_calls: NotRequired[list[ToolCallDict]]
    tool_call_id: NotRequired[str | None]
    is_error: NotRequired[bool]


class UsageDict(TypedDict):
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call as the model sent it. Malformed argument JSON is kept, never raised: the runtime
    returns `arguments_error` to the model as a tool error so it can correct itself."""

    id: str
    name: str
    arguments: dict[str, Any]
    raw_arguments: str
    arguments_error: str | None = None

    @classmethod
    def from_raw(cls, *, id: str, name: str, raw_arguments: object) -> ToolCall:
        """`raw_arguments` as the provider sent it: a JSON string by the specification, but some
        OpenAI-compatible servers send the object itself (kept as its JSON text) or nothing."""
        if raw_arguments is None:
            raw_arguments = ""
        elif not isinstance(raw_arguments, str):
            raw_arguments = json.dumps(raw_arguments)
        # Kept in the reply's record (jsonb) whatever they hold: a NUL or a lone surrogate in
        # the id, the name or the raw text must not fail that write (the text is read first).
        id, name = storable_text(id), storable_text(name)
        kept = storable_text(raw_arguments)
        if not raw_arguments.strip():
            return cls(id=id, name=name, arguments={}, raw_arguments=kept)
        error: str | None = None
        try:
            # Strict JSON: Python's reader takes NaN and Infinity (and 1e400 as infinity),
            # which JSON has not and PostgreSQL's jsonb refuses.
            parsed = json.loads(raw_arguments, parse_constant=_not_json, parse_float=_finite_float)
        except ValueError as exc:
            error = f"Tool arguments are not valid JSON: {exc}"
        else:
            if not isinstance(parsed, dict):
                error = f"Tool arguments must be a JSON object, got {type(parsed).__name__}"
            elif problem := unstorable(parsed):
                # Neither text nor jsonb can hold it: the arguments could not even be recorded.
                error = f"Tool arguments cannot be stored: {problem.rstrip('.')}"
            else:
                return cls(id=id, name=name, arguments=parsed, raw_arguments=kept)
        return cls(id=id, name=name, arguments={}, raw_arguments=kept, arguments_error=error)

    def to_dict(self) -> ToolCallDict:
        return {
            "id": self.id,
            "name": self.name,
            "raw_arguments": self.raw_arguments,
            "arguments_error": self.arguments_error,
        }

    @classmethod
    def from_dict(cls, data: ToolCallDict) -> ToolCall:
        return cls.from_raw(id=data["id"], name=data["name"], raw_arguments=data["raw_arguments"])


def _not_json(constant: str) -> float:
    raise ValueError(f"{constant} is not a JSON value")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is too large a number")
    return value


def new_tool_call_id() -> str:
    return f"call_{uuid.uuid4().hex}"


def unique_call_id(call_id: object, seen: set[str]) -> str:
    """The id the model gave a call, or a fresh one when it gave none (some OpenAI-compatible
    servers), an empty one, or one an earlier call of the same reply already has: the id pairs
    the call with its result and keys its idempotency, so one reply's ids must be distinct.
    `seen` holds the reply's ids so far and gains the one returned."""
    if not isinstance(call_id, str) or not call_id or call_id in seen:
        call_id = new_tool_call_id()
    seen.add(call_id)
    return call_id


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # role "tool": the call this result answers
    is_error: bool = False  # role "tool": the tool failed; Anthropic gets it as is_error

    @classmethod
    def system(cls, content: str) -> Message:
        return cls(role="system", content=content)

    @classmethod
    def user(cls, content: str) -> Message:
        return cls(role="user", content=content)

    @classmethod
    def assistant(cls, content: str = "", tool_calls: tuple[ToolCall, ...] = ()) -> Message:
        return cls(role="assistant", content=content, tool_calls=tool_calls)

    @classmethod
    def tool_result(cls, tool_call_id: str, content: str, *, is_error: bool = False) -> Message:
        return cls(role="tool", content=content, tool_call_id=tool_call_id, is_error=is_error)

    def to_dict(self) -> MessageDict:
        data: MessageDict = {"role": self.role, "content": self.content}
        if self.tool_calls:
            data["tool_calls"] = [call.to_dict() for call in self.tool_calls]
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
        if self.is_error:
            data["is_error"] = True
        return data

    @classmethod
    def from_dict(cls, data: MessageDict) -> Message:
        return cls(
            role=data["role"],
            content=data["content"],
            tool_calls=tuple(ToolCall.from_dict(c) for c in data.get("tool_calls", [])),
            tool_call_id=data.get("tool_call_id"),
            is_error=data.get("is_error", False),
        )


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts. `input_tokens` excludes cached tokens on every provider (Anthropic's meaning;
    OpenAI's prompt_tokens are split), so cost = each count times its own price."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def total_input_tokens(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    @property
    def total_tokens(self) -> int:
        return self.total_input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
        )

    def to_dict(self) -> UsageDict:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }


@dataclass(frozen=True, slots=True)
class Completion:
    text: str
    tool_calls: tuple[ToolCall, ...]
    usage: Usage
    stop_reason: StopReason
    raw_stop_reason: str | None
    model: str
    provider: ProviderKind
    raw: RawResponse  # the provider's response (assembled from the chunks when streamed)
    latency_ms: float  # wall time of the call, retries and backoff included (not before_send)
    attempts: int = 1

    def __post_init__(self) -> None:
        # A NUL or an unpaired surrogate in the text would fail the write of the reply (text
        # and jsonb cannot hold them) and with it the run: replaced, as a decoder shows what it
        # cannot read.
        text = storable_text(self.text)
        if text is not self.text:
            object.__setattr__(self, "text", text)

    def to_message(self) -> Message:
        """The assistant turn to append to the conversation before running the tools."""
        return Message.assistant(self.text, self.tool_calls)


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    index: int
    id: str | None
    name: str | None
    arguments_delta: str


@dataclass(frozen=True, slots=True)
class ToolCallComplete:
    index: int
    tool_call: ToolCall


@dataclass(frozen=True, slots=True)
class UsageUpdate:
    usage: Usage


@dataclass(frozen=True, slots=True)
class StreamDone:
    """Always the last event of a stream that did not raise."""

    completion: Completion


StreamEvent = TextDelta | ToolCallDelta | ToolCallComplete | UsageUpdate | StreamDone


@dataclass(frozen=True, slots=True)
class ProviderConfig:
    """Plain configuration: the agency's provider row (decrypted key) or settings build one.

    `api_key=None` means "from the environment" (OPENAI_API_KEY / ANTHROPIC_API_KEY /
    GEMINI_API_KEY or GOOGLE_API_KEY); an
    `openai_compatible` server (Ollama, vLLM, llama.cpp) needs a `base_url` and no key.
    `max_retries` counts retries after the first attempt; the backoff doubles from
    `backoff_base` up to `backoff_max`, and a Retry-After header wins, capped at `retry_after_cap`.
    """

    kind: ProviderKind
    model: str
    api_key: str | None = field(default=None, repr=False)
    base_url: str | None = None
    organization: str | None = None  # OpenAI's organization id (sent as OpenAI-Organization)
    timeout: float = 60.0
    max_retries: int = 2
    backoff_base: float = 0.5
    backoff_max: float = 8.0
    retry_after_cap: float = 30.0
    default_max_tokens: int = 4096

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.timeout <= 0:
            raise LLMConfigurationError(
                "ProviderConfig needs max_retries >= 0 and timeout > 0", provider=self.kind
            )
