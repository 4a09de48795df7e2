"""The Gemini API's requests as the fake provider reads them: the model and the method from the
path (``/v1beta/models/{model}:generateContent`` or ``:streamGenerateContent``), the
conversation from ``contents``, and the conversation-order rules the real API enforces on
function calls.

Pure standard library, like the rest of the fake server's scripting.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import unquote

PATH = re.compile(r"^/(?P<version>v1beta|v1|v1alpha)/models/(?P<model>[^/:]+):(?P<method>\w+)$")
METHODS = ("generateContent", "streamGenerateContent")


def match(path: str) -> tuple[str, str] | None:
    """(model, method) of a generateContent path, or None for any other path."""
    found = PATH.match(path)
    if found is None or found["method"] not in METHODS:
        return None
    return unquote(found["model"]), found["method"]


def model(path: str) -> str:
    found = match(path)
    return found[0] if found else ""


def is_stream(path: str) -> bool:
    found = match(path)
    return found is not None and found[1] == "streamGenerateContent"


def _parts(content: object) -> list[dict[str, Any]]:
    parts = content.get("parts") if isinstance(content, dict) else None
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def contents(body: Any) -> list[dict[str, Any]]:
    found = body.get("contents") if isinstance(body, dict) else None
    return [c for c in found if isinstance(c, dict)] if isinstance(found, list) else []


def tool_names(body: Any) -> list[str]:
    return [
        str(declaration.get("name"))
        for tool in body.get("tools") or []
        for declaration in tool.get("functionDeclarations") or []
    ]


def system(body: Any) -> str | None:
    instruction = body.get("systemInstruction")
    if not instruction:
        return None
    return "".join(str(part.get("text", "")) for part in _parts(instruction))


def assistant_turns(body: Any) -> int:
    return sum(1 for content in contents(body) if content.get("role") == "model")


def _result_text(response: object) -> str:
    """A functionResponse's result as the model reads it: the gateway's text under "output"
    (or "error"), else the object as JSON."""
    if isinstance(response, dict):
        for key in ("output", "error"):
            if isinstance(response.get(key), str):
                return str(response[key])
    return json.dumps(response)


def tool_results(body: Any) -> list[str]:
    return [
        _result_text(part["functionResponse"].get("response"))
        for content in contents(body)
        for part in _parts(content)
        if isinstance(part.get("functionResponse"), dict)
    ]


def last_message_is_tool_result(body: Any) -> bool:
    found = contents(body)
    return bool(found) and any("functionResponse" in part for part in _parts(found[-1]))


def last_user_text(body: Any) -> str:
    for content in reversed(contents(body)):
        if content.get("role", "user") != "user":
            continue
        texts = [str(part["text"]) for part in _parts(content) if "text" in part]
        if texts:
            return "".join(texts)
    return ""


def order_error(body: Any) -> str | None:
    """The 400 message the Gemini API gives a conversation whose function calls and responses
    do not pair up, or None. A model turn with function calls is followed at once by a user turn
    holding one functionResponse per call (by name; by id too where the call had one), and a
    functionResponse answers a call of the model turn just before it."""
    if not isinstance(body, dict) or not isinstance(body.get("contents"), list):
        return "* GenerateContentRequest.contents: contents is not specified"
    calls: list[dict[str, Any]] = []  # the function calls of the previous model turn
    for index, content in enumerate(body["contents"]):
        if not isinstance(content, dict):
            return f"* GenerateContentRequest.contents[{index}]: must be an object"
        parts = _parts(content)
        responses = [
            p["functionResponse"] for p in parts if isinstance(p.get("functionResponse"), dict)
        ]
        if content.get("role") == "model":
            if calls:
                return _unanswered(index - 1, calls)
            calls = [p["functionCall"] for p in parts if isinstance(p.get("functionCall"), dict)]
            continue
        problem = _responses_error(index, calls, responses)
        if problem:
            return problem
        calls = []
    if calls:
        return _unanswered(len(body["contents"]) - 1, calls)
    return None


def _responses_error(
    index: int, calls: list[dict[str, Any]], responses: list[dict[str, Any]]
) -> str | None:
    if responses and not calls:
        return (
            f"* GenerateContentRequest.contents[{index}]: a function response turn must come "
            "immediately after a function call turn."
        )
    if len(responses) != len(calls):
        return (
            f"* GenerateContentRequest.contents[{index}]: Please ensure that the number of "
            "function response parts is equal to the number of function call parts of the "
            f"function call turn ({len(responses)} responses for {len(calls)} calls)."
        )
    open_calls = list(calls)
    for position, response in enumerate(responses):
        answered = next(
            (
                call
                for call in open_calls
                if call.get("name") == response.get("name")
                and (not call.get("id") or call.get("id") == response.get("id"))
            ),
            None,
        )
        if answered is None:
            return (
                f"* GenerateContentRequest.contents[{index}].parts[{position}]."
                f"function_response: name {response.get('name')!r} (id "
                f"{response.get('id')!r}) does not answer a function call of the previous turn."
            )
        open_calls.remove(answered)
    return None


def _unanswered(index: int, calls: list[dict[str, Any]]) -> str:
    names = ", ".join(str(call.get("name")) for call in calls)
    return (
        f"* GenerateContentRequest.contents[{index}]: the function call turn ({names}) must be "
        "followed at once by a user turn with a function response part for each call."
    )
