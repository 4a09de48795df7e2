"""What the fake provider answers: scripted steps, rule-based responders, recorded requests.

Pure standard library on purpose: benchmarks and `python -m devkit.fake_server` use it
without Django.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from devkit.fake_server import google_request

Wire = Literal["openai", "anthropic", "google"]
Stop = Literal["end", "tool_calls", "max_tokens"]


@dataclass(frozen=True, slots=True)
class ScriptedToolCall:
    name: str
    # A mapping is sent as JSON; a string is sent verbatim, so it can be malformed on purpose.
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None  # None: a fresh id in the wire's style (call_..., toolu_...); "" is sent
    # What some OpenAI-compatible servers send, to exercise the client's defences:
    omit_id: bool = False  # no `id` key at all (both wires)
    omit_type: bool = False  # OpenAI: no `"type": "function"`
    object_arguments: bool = False  # OpenAI: `arguments` as a JSON object, not a string


@dataclass(frozen=True, slots=True)
class Reply:
    text: str = ""
    tool_calls: tuple[ScriptedToolCall, ...] = ()
    input_tokens: int = 10  # uncached input, as in Anthropic's usage
    output_tokens: int = 5
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    stop: Stop | None = None  # None: "tool_calls" when there are tool calls, else "end"
    latency: float | None = None  # seconds before answering; None: the server's latency
    # Streamed only: send just the first `stream_events` events (negative: all but the last
    # -n; OpenAI's `data: [DONE]` counts as one), then end the response normally: a stream cut
    # off before its final event.
    stream_events: int | None = None
    # Streamed only: after the events sent, an error event instead of the rest (Anthropic's
    # `event: error`, OpenAI's `data: {"error": ...}`), e.g. HttpError(529) for overloaded_error.
    stream_error: HttpError | None = None
    # Streamed only: seconds between events, as a model generating its reply sends them (each
    # event its own write); None or 0: all events in one write.
    stream_interval: float | None = None

    @property
    def stop_reason(self) -> Stop:
        if self.stop is not None:
            return self.stop
        return "tool_calls" if self.tool_calls else "end"


@dataclass(frozen=True, slots=True)
class HttpError:
    status: int = 500
    retry_after: float | None = None  # sent as the Retry-After header (seconds)
    message: str = "Simulated provider failure"


@dataclass(frozen=True, slots=True)
class Hang:
    """Accept the request and answer nothing for `seconds` (ended early when the server stops)."""

    seconds: float = 30.0


@dataclass(frozen=True, slots=True)
class RawReply:
    """A JSON body sent verbatim, for shapes no real API sends (no choices, no content)."""

    body: Mapping[str, Any]
    status: int = 200


Step = Reply | HttpError | Hang | RawReply


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    wire: Wire
    path: str
    headers: Mapping[str, str]  # lower-case names
    body: Mapping[str, Any]
    script_key: str | None

    @property
    def model(self) -> str:
        if self.wire == "google":  # in the path: /v1beta/models/{model}:generateContent
            return google_request.model(self.path)
        return str(self.body.get("model", ""))

    @property
    def api_key(self) -> str | None:
        """The key the client sent, whichever header its SDK version uses."""
        if "x-api-key" in self.headers:
            return self.headers["x-api-key"]
        if "x-goog-api-key" in self.headers:
            return self.headers["x-goog-api-key"]
        authorization = self.headers.get("authorization", "")
        return authorization.removeprefix("Bearer ") if authorization else None

    @property
    def stream(self) -> bool:
        if self.wire == "google":  # the method says it: :streamGenerateContent
            return google_request.is_stream(self.path)
        return bool(self.body.get("stream"))

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation: `messages`, or the Gemini API's `contents` (role user / model)."""
        if self.wire == "google":
            return google_request.contents(self.body)
        return list(self.body.get("messages") or [])

    @property
    def tool_names(self) -> list[str]:
        if self.wire == "google":
            return google_request.tool_names(self.body)
        tools = self.body.get("tools") or []
        if self.wire == "openai":
            return [tool["function"]["name"] for tool in tools]
        return [tool["name"] for tool in tools]

    @property
    def system(self) -> str | None:
        """Anthropic's `system` parameter, Gemini's `systemInstruction`, or OpenAI's
        system/developer messages joined."""
        if self.wire == "google":
            return google_request.system(self.body)
        if self.wire == "anthropic":
            system = self.body.get("system")
            if isinstance(system, list):
                return "\n\n".join(block.get("text", "") for block in system)
            return system
        parts = [m["content"] for m in self.messages if m.get("role") in ("system", "developer")]
        return "\n\n".join(parts) if parts else None

    @property
    def assistant_turns(self) -> int:
        """How many model replies the conversation already holds: which step of a run this is."""
        if self.wire == "google":
            return google_request.assistant_turns(self.body)
        return sum(1 for m in self.messages if m.get("role") == "assistant")

    @property
    def tool_results(self) -> list[str]:
        """Contents of every tool result sent, in order."""
        if self.wire == "google":
            return google_request.tool_results(self.body)
        if self.wire == "openai":
            return [str(m.get("content", "")) for m in self.messages if m.get("role") == "tool"]
        return [
            str(block.get("content", ""))
            for m in self.messages
            if isinstance(m.get("content"), list)
            for block in m["content"]
            if block.get("type") == "tool_result"
        ]

    @property
    def last_message_is_tool_result(self) -> bool:
        if self.wire == "google":
            return google_request.last_message_is_tool_result(self.body)
        if not self.messages:
            return False
        last = self.messages[-1]
        if self.wire == "openai":
            return last.get("role") == "tool"
        content = last.get("content")
        return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)

    @property
    def last_user_text(self) -> str:
        if self.wire == "google":
            return google_request.last_user_text(self.body)
        for message in reversed(self.messages):
            if message.get("role") != "user":
                continue
            content = message.get("content")
            if isinstance(content, str):
                return content
            texts = [b.get("text", "") for b in content or [] if b.get("type") == "text"]
            if texts:
                return "".join(texts)
        return ""


Responder = Callable[[RecordedRequest], Step]


class Script:
    """A queue of steps, consumed one per request; when empty, the responder (if any) answers."""

    def __init__(self, *steps: Step, responder: Responder | None = None) -> None:
        self._steps: deque[Step] = deque(steps)
        self._lock = threading.Lock()
        self.responder = responder

    def push(self, *steps: Step) -> Script:
        with self._lock:
            self._steps.extend(steps)
        return self

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._steps)

    def next_queued(self) -> Step | None:
        """The next queued step, without asking the responder (embeddings: fake_server.server)."""
        with self._lock:
            return self._steps.popleft() if self._steps else None

    def next_step(self, request: RecordedRequest) -> Step | None:
        with self._lock:
            if self._steps:
                return self._steps.popleft()
        return self.responder(request) if self.responder is not None else None


def text_reply(text: str, **usage: Any) -> Reply:
    return Reply(text=text, **usage)


def tool_call_reply(
    name: str, arguments: Mapping[str, Any] | str | None = None, *, text: str = "", **usage: Any
) -> Reply:
    call = ScriptedToolCall(name=name, arguments={} if arguments is None else arguments)
    return Reply(text=text, tool_calls=(call,), **usage)


def malformed_tool_call_reply(name: str, raw_arguments: str = '{"id": 42, "note": ') -> Reply:
    return Reply(tool_calls=(ScriptedToolCall(name=name, arguments=raw_arguments),))


def rate_limited(retry_after: float | None = 0.01) -> HttpError:
    return HttpError(status=429, retry_after=retry_after, message="Rate limit reached")


def server_error(status: int = 500) -> HttpError:
    return HttpError(status=status)


def hang(seconds: float = 30.0) -> Hang:
    return Hang(seconds=seconds)


def by_turn(*steps: Step, then: Step | None = None) -> Responder:
    """Stateless: the reply is chosen by how many assistant turns the request already carries, so
    concurrent runs, and a run resumed after a crash, each get the step they are at."""

    def respond(request: RecordedRequest) -> Step:
        turn = request.assistant_turns
        if turn < len(steps):
            return steps[turn]
        if then is not None:
            return then
        return HttpError(status=400, message=f"fake script has no reply for turn {turn}")

    return respond


def react_responder(
    tool_name: str, arguments: Mapping[str, Any], final_text: str = "Done."
) -> Responder:
    """Call `tool_name` once, then answer `final_text` once a tool result came back."""

    def respond(request: RecordedRequest) -> Step:
        if request.last_message_is_tool_result:
            return text_reply(final_text)
        return tool_call_reply(tool_name, arguments)

    return respond


def echo_responder(request: RecordedRequest) -> Step:
    """The command-line default: a plain answer quoting the last user message."""
    return text_reply(f"(fake model) You said: {request.last_user_text}")
