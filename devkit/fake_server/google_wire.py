"""The Gemini API's replies (``generateContent``, ``streamGenerateContent?alt=sse``) and errors,
as the real API sends them and the ``google-genai`` SDK parses them."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

from devkit.fake_server.script import HttpError, Reply, ScriptedToolCall

_FINISH = {"end": "STOP", "tool_calls": "STOP", "max_tokens": "MAX_TOKENS"}
_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def error_body(error: HttpError) -> dict[str, Any]:
    """Google's error shape; a Retry-After becomes the RetryInfo detail the API sends with a
    429 (the server sends the header as well)."""
    body: dict[str, Any] = {
        "code": error.status,
        "message": error.message,
        "status": _STATUS.get(error.status, "UNKNOWN"),
    }
    if error.retry_after is not None:
        body["details"] = [
            {
                "@type": "type.googleapis.com/google.rpc.RetryInfo",
                "retryDelay": f"{error.retry_after:g}s",
            }
        ]
    return {"error": body}


def _args(call: ScriptedToolCall) -> Any:
    """``args`` is an object on this wire; a script's JSON text is sent as the object it holds.
    Text that is not JSON cannot be sent at all: see :func:`_malformed`."""
    if not isinstance(call.arguments, str):
        return dict(call.arguments)
    return json.loads(call.arguments)


def _malformed(reply: Reply) -> bool:
    """A scripted call whose arguments are not a JSON object is what the real API never sends:
    it answers such a generation with finishReason MALFORMED_FUNCTION_CALL and no content. So
    does it a reply said to stop for tool calls that has none (the other wires' "tool_calls"
    stop without a call)."""
    if reply.stop == "tool_calls" and not reply.tool_calls:
        return True
    for call in reply.tool_calls:
        if isinstance(call.arguments, str):
            try:
                value = json.loads(call.arguments)
            except ValueError:
                return True
            if not isinstance(value, dict):
                return True
    return False


def _function_call(call: ScriptedToolCall) -> dict[str, Any]:
    # Gemini 2.x sends no id (the client makes its own); a script can give one.
    data: dict[str, Any] = {"name": call.name, "args": _args(call)}
    if call.id is not None and not call.omit_id:
        data["id"] = call.id
    return {"functionCall": data}


def _usage(reply: Reply, output_tokens: int) -> dict[str, Any]:
    prompt = reply.input_tokens + reply.cache_read_tokens + reply.cache_write_tokens
    usage: dict[str, Any] = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": output_tokens,
        "totalTokenCount": prompt + output_tokens,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}],
    }
    if reply.cache_read_tokens:
        usage["cachedContentTokenCount"] = reply.cache_read_tokens
    return usage


def _response(
    parts: list[dict[str, Any]], finish: str | None, usage: dict[str, Any], model: str, rid: str
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    return {
        "candidates": [candidate],
        "usageMetadata": usage,
        "modelVersion": model,
        "responseId": rid,
    }


def _response_id() -> str:
    return uuid.uuid4().hex[:22]


def message(reply: Reply, model: str) -> dict[str, Any]:
    if _malformed(reply):
        body = _response([], "MALFORMED_FUNCTION_CALL", _usage(reply, 0), model, _response_id())
        del body["candidates"][0]["content"]
        return body
    parts: list[dict[str, Any]] = [{"text": reply.text}] if reply.text else []
    parts += [_function_call(call) for call in reply.tool_calls]
    finish = _FINISH[reply.stop_reason]
    return _response(parts, finish, _usage(reply, reply.output_tokens), model, _response_id())


def _words(text: str) -> list[str]:
    # Gemini streams text in pieces of a few words.
    words = text.split(" ")
    return [
        " ".join(words[i : i + 3]) + (" " if i + 3 < len(words) else "")
        for i in range(0, len(words), 3)
    ]


def stream(reply: Reply, model: str) -> Iterator[dict[str, Any]]:
    """The chunks of a streamed reply: the text in pieces, each call whole (one chunk each),
    the usage so far in every chunk, and a last chunk with an empty text part, the
    finishReason and the whole usage (so that ``stream_events=-1`` cuts a stream after all
    its content, and ``stream_events=0`` before any)."""
    rid = _response_id()
    if _malformed(reply):
        yield message(reply, model)
        return
    pieces = [{"text": word} for word in _words(reply.text)] if reply.text else []
    pieces += [_function_call(call) for call in reply.tool_calls]
    sent = 0
    for part in pieces:
        sent = min(sent + 1, reply.output_tokens)
        yield _response([part], None, _usage(reply, sent), model, rid)
    finish = _FINISH[reply.stop_reason]
    yield _response([{"text": ""}], finish, _usage(reply, reply.output_tokens), model, rid)


def sse(chunk: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(chunk)}\r\n\r\n".encode()


def stream_events(reply: Reply, model: str) -> list[bytes]:
    """The reply's events, cut and ended with an error event as the reply asks."""
    events = [sse(chunk) for chunk in stream(reply, model)]
    if reply.stream_events is not None:
        events = events[: reply.stream_events]
    if reply.stream_error is not None:
        events.append(sse(error_body(reply.stream_error)))
    return events
