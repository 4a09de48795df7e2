"""The OpenAI Chat Completions and Anthropic Messages wire formats, plain and server-sent events,
as the real APIs send them (and the real SDKs parse them)."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

from devkit.fake_server import google_wire
from devkit.fake_server.script import HttpError, Reply, ScriptedToolCall, Wire

_OPENAI_FINISH = {"end": "stop", "tool_calls": "tool_calls", "max_tokens": "length"}
_ANTHROPIC_STOP = {"end": "end_turn", "tool_calls": "tool_use", "max_tokens": "max_tokens"}
_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}
_OPENAI_ERROR_TYPES = {
    400: "invalid_request_error",
    404: "invalid_request_error",
    429: "rate_limit_exceeded",
}
_ARGUMENT_PIECE = 12  # streamed tool arguments arrive in pieces, as the real APIs send them


def _words(text: str) -> list[str]:
    return re.findall(r"\s*\S+\s*", text) or ([text] if text else [])


def _pieces(text: str) -> list[str]:
    return [text[i : i + _ARGUMENT_PIECE] for i in range(0, len(text), _ARGUMENT_PIECE)] or [""]


def _raw_arguments(call: ScriptedToolCall) -> str:
    return call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)


def _call_id(call: ScriptedToolCall, prefix: str) -> str:
    return call.id if call.id is not None else f"{prefix}{uuid.uuid4().hex[:24]}"


def _openai_call(call: ScriptedToolCall, *, arguments: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"id": _call_id(call, "call_"), "type": "function"}
    if call.omit_id:
        del data["id"]
    if call.omit_type:
        del data["type"]
    data["function"] = {"name": call.name, "arguments": arguments}
    return data


def _openai_arguments(call: ScriptedToolCall) -> Any:
    if call.object_arguments and not isinstance(call.arguments, str):
        return dict(call.arguments)
    return _raw_arguments(call)


def _sse(data: dict[str, Any], event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def error_body(wire: Wire, error: HttpError) -> dict[str, Any]:
    if wire == "google":
        return google_wire.error_body(error)
    if wire == "openai":
        kind = _OPENAI_ERROR_TYPES.get(error.status, "server_error")
        return {"error": {"message": error.message, "type": kind, "param": None, "code": kind}}
    kind = _ANTHROPIC_ERROR_TYPES.get(error.status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": error.message}}


def stream(wire: Wire, reply: Reply, model: str, *, include_usage: bool) -> list[bytes]:
    """The reply's events, cut and ended with an error event as the reply asks."""
    if wire == "openai":
        events = list(openai_stream(reply, model, include_usage=include_usage))
    else:
        events = list(anthropic_stream(reply, model))
    if reply.stream_events is not None:
        events = events[: reply.stream_events]
    if reply.stream_error is not None:
        body = error_body(wire, reply.stream_error)
        events.append(_sse(body) if wire == "openai" else _sse(body, "error"))
    return events


# OpenAI Chat Completions ----------------------------------------------------------------------


def _openai_usage(reply: Reply) -> dict[str, Any]:
    prompt = reply.input_tokens + reply.cache_read_tokens + reply.cache_write_tokens
    details: dict[str, int] = {"cached_tokens": reply.cache_read_tokens}
    if reply.cache_write_tokens:
        details["cache_write_tokens"] = reply.cache_write_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": reply.output_tokens,
        "total_tokens": prompt + reply.output_tokens,
        "prompt_tokens_details": details,
    }


def openai_completion(reply: Reply, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None, "refusal": None}
    if reply.tool_calls:
        message["tool_calls"] = [
            _openai_call(call, arguments=_openai_arguments(call)) for call in reply.tool_calls
        ]
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": _OPENAI_FINISH[reply.stop_reason],
            }
        ],
        "usage": _openai_usage(reply),
        "system_fingerprint": None,
    }


def openai_stream(reply: Reply, model: str, *, include_usage: bool) -> Iterator[bytes]:
    head = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": None,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return _sse({**head, "choices": [choice]})

    yield chunk({"role": "assistant", "content": "", "refusal": None})
    for word in _words(reply.text):
        yield chunk({"content": word})
    for index, call in enumerate(reply.tool_calls):
        if call.object_arguments:  # the whole object in the opening chunk, as some servers do
            opening = {"index": index, **_openai_call(call, arguments=_openai_arguments(call))}
            yield chunk({"tool_calls": [opening]})
            continue
        yield chunk({"tool_calls": [{"index": index, **_openai_call(call, arguments="")}]})
        for piece in _pieces(_raw_arguments(call)):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, _OPENAI_FINISH[reply.stop_reason])
    if include_usage:
        yield _sse({**head, "choices": [], "usage": _openai_usage(reply)})
    yield b"data: [DONE]\n\n"


# Anthropic Messages ---------------------------------------------------------------------------


def _anthropic_input(call: ScriptedToolCall) -> Any:
    """The parsed object; the API only ever sends objects, so a malformed script string is sent
    as a string: the one way to exercise a client's defences in a non-streamed reply."""
    if not isinstance(call.arguments, str):
        return dict(call.arguments)
    try:
        return json.loads(call.arguments)
    except ValueError:
        return call.arguments


def _anthropic_usage(reply: Reply, output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": reply.input_tokens,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": reply.cache_write_tokens,
        "cache_read_input_tokens": reply.cache_read_tokens,
    }


def _tool_use(call: ScriptedToolCall, tool_input: Any) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_use", "id": _call_id(call, "toolu_")}
    if call.omit_id:
        del block["id"]
    return {**block, "name": call.name, "input": tool_input}


def anthropic_message(reply: Reply, model: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
    content += [_tool_use(call, _anthropic_input(call)) for call in reply.tool_calls]
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": _ANTHROPIC_STOP[reply.stop_reason],
        "stop_sequence": None,
        "usage": _anthropic_usage(reply, reply.output_tokens),
    }


def anthropic_stream(reply: Reply, model: str) -> Iterator[bytes]:
    start = {**anthropic_message(reply, model), "content": [], "stop_reason": None}
    start["usage"] = _anthropic_usage(reply, 1)
    yield _sse({"type": "message_start", "message": start}, "message_start")
    index = 0
    if reply.text:
        block: dict[str, Any] = {"type": "text", "text": ""}
        yield _sse(
            {"type": "content_block_start", "index": 0, "content_block": block},
            "content_block_start",
        )
        yield _sse({"type": "ping"}, "ping")
        for word in _words(reply.text):
            delta = {"type": "text_delta", "text": word}
            yield _sse(
                {"type": "content_block_delta", "index": 0, "delta": delta}, "content_block_delta"
            )
        yield _sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
        index = 1
    for call in reply.tool_calls:
        block = _tool_use(call, {})
        yield _sse(
            {"type": "content_block_start", "index": index, "content_block": block},
            "content_block_start",
        )
        for piece in _pieces(_raw_arguments(call)):
            delta = {"type": "input_json_delta", "partial_json": piece}
            yield _sse(
                {"type": "content_block_delta", "index": index, "delta": delta},
                "content_block_delta",
            )
        yield _sse({"type": "content_block_stop", "index": index}, "content_block_stop")
        index += 1
    stop = {"stop_reason": _ANTHROPIC_STOP[reply.stop_reason], "stop_sequence": None}
    usage = {"output_tokens": reply.output_tokens}
    yield _sse({"type": "message_delta", "delta": stop, "usage": usage}, "message_delta")
    yield _sse({"type": "message_stop"}, "message_stop")
