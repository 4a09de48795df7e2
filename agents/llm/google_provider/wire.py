"""Gemini (the Gemini API's generateContent): our messages and tools in the wire's shapes, and
its replies read back into ours."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from google.genai import types

from agents.llm.retry import malformed_response
from agents.llm.types import (
    Message,
    StopReason,
    ToolCall,
    ToolDefinition,
    Usage,
    unique_call_id,
)

PROVIDER = "google"

# Gemini 3 models refuse a replayed functionCall part without the thought signature the model
# gave it (HTTP 400 "Function call is missing a thought_signature"). The gateway's messages do
# not carry signatures (they are persisted provider-neutral), so a replayed call gets the value
# Google documents for history the client did not keep ("Thought signatures": dummy
# signatures): the model loses nothing it needs to read the conversation, only the reasoning
# that led to the call. Only the first call of a turn carries a signature, as the model sends it.
REPLAYED_SIGNATURE = b"skip_thought_signature_validator"

_STOP_REASONS: dict[str, StopReason] = {
    "STOP": "end",
    "MAX_TOKENS": "max_tokens",
    "SAFETY": "refusal",
    "RECITATION": "refusal",
    "BLOCKLIST": "refusal",
    "PROHIBITED_CONTENT": "refusal",
    "SPII": "refusal",
    "IMAGE_SAFETY": "refusal",
    "MODEL_ARMOR": "refusal",
}


def to_google_contents(
    messages: tuple[Message, ...],
) -> tuple[types.Content | None, list[types.Content]]:
    """(system instruction, contents). Tool results are user turns of functionResponse parts
    naming the function they answer; consecutive turns of one role are merged, since the
    results answering one model turn must all arrive in the one user turn after it."""
    system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
    names: dict[str, str] = {}  # tool call id -> function name, for the functionResponse parts
    turns: list[tuple[str, list[types.Part]]] = []
    for message in messages:
        if message.role == "system":
            continue
        role = "model" if message.role == "assistant" else "user"
        parts = _parts(message, names)
        if not parts:
            continue
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(parts)
        else:
            turns.append((role, parts))
    instruction = types.Content(parts=[types.Part(text=system)]) if system else None
    return instruction, [types.Content(role=role, parts=parts) for role, parts in turns]


def _parts(message: Message, names: dict[str, str]) -> list[types.Part]:
    if message.role == "tool":
        call_id = message.tool_call_id or ""
        name = names.get(call_id)
        if name is None:
            # Its call is not in the conversation (trimmed from the context window): the API
            # refuses a functionResponse without a name, and one that answers no call of the
            # turn before, so the result goes as text. (A Message carries no tool name.)
            outcome = "failed" if message.is_error else "returned"
            text = f"[An earlier tool call ({call_id or 'no id'}) {outcome}: {message.content}]"
            return [types.Part(text=text)]
        # The API reads a function's result from an object: "output", or "error" for a failure.
        key = "error" if message.is_error else "output"
        response = types.FunctionResponse(
            id=call_id or None, name=name, response={key: message.content}
        )
        return [types.Part(function_response=response)]
    # The API refuses empty text parts.
    parts = [types.Part(text=message.content)] if message.content else []
    for position, call in enumerate(message.tool_calls):
        names[call.id] = call.name
        # The API takes an object here; a malformed call is replayed as {} next to its error.
        parts.append(
            types.Part(
                function_call=types.FunctionCall(id=call.id, name=call.name, args=call.arguments),
                thought_signature=REPLAYED_SIGNATURE if position == 0 else None,
            )
        )
    return parts


def to_google_tools(tools: tuple[ToolDefinition, ...]) -> list[types.Tool]:
    """One tool holding every function declaration. The schemas go as JSON Schema
    (``parametersJsonSchema``), not the API's OpenAPI subset (``parameters``), which refuses
    keywords the registry's schemas use."""
    if not tools:
        return []
    declarations = [
        types.FunctionDeclaration(
            name=tool.name, description=tool.description, parameters_json_schema=tool.parameters
        )
        for tool in tools
    ]
    return [types.Tool(function_declarations=declarations)]


def usage_from_google(usage: types.GenerateContentResponseUsageMetadata | None) -> Usage:
    """The prompt count includes the cached tokens (read from a context cache); the model's
    thinking is billed as output, with the candidates' tokens."""
    if usage is None:
        return Usage()
    cached = usage.cached_content_token_count or 0
    prompt = (usage.prompt_token_count or 0) + (usage.tool_use_prompt_token_count or 0)
    return Usage(
        input_tokens=max(prompt - cached, 0),
        output_tokens=(usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0),
        cache_read_tokens=cached,
    )


def finish_reason_name(reason: object) -> str | None:
    """The wire's name of a candidate's finishReason (the SDK gives an enum, or the string of a
    value it does not know yet)."""
    if reason is None:
        return None
    value = getattr(reason, "value", reason)
    return str(value)


def stop_reason(raw: str | None, tool_calls: tuple[ToolCall, ...]) -> StopReason:
    reason = _STOP_REASONS.get(raw or "", "other")
    # A reply cut off by the token limit says so even when it carries calls: the last one's
    # arguments are then most likely incomplete.
    if reason == "max_tokens":
        return reason
    # Gemini finishes a reply with function calls with STOP: the calls are what matters.
    return "tool_calls" if tool_calls else reason


def tool_call_from_part(call: types.FunctionCall, *, ids: set[str], position: int) -> ToolCall:
    """A functionCall part: Gemini 2.x sends no id (one is made), ``args`` is an object."""
    if not call.name or not isinstance(call.name, str):
        raise malformed_response(
            provider=PROVIDER, detail=f"tool call {position} (a functionCall part) has no name"
        )
    args: Any = call.args
    # Through the same checks as OpenAI's JSON text: the arguments may not carry what
    # PostgreSQL's jsonb refuses (ToolCall.from_raw).
    raw = args if isinstance(args, str) else json.dumps({} if args is None else args)
    return ToolCall.from_raw(id=unique_call_id(call.id, ids), name=call.name, raw_arguments=raw)


def reply_parts(candidate: types.Candidate | None) -> list[types.Part]:
    if candidate is None or candidate.content is None:
        return []
    return list(candidate.content.parts or [])


def visible_text(parts: Iterable[types.Part]) -> str:
    """The reply's text, without the model's thought summaries (``thought``: true)."""
    return "".join(part.text for part in parts if part.text and not part.thought)


# Replies the model could not form: a function call the API could not parse, or a call of a
# function the request did not declare (UNEXPECTED_TOOL_CALL), which the API drops.
_UNFORMED = frozenset({"MALFORMED_FUNCTION_CALL", "MALFORMED_RESPONSE", "UNEXPECTED_TOOL_CALL"})


def check_reply(raw_reason: str | None, calls: tuple[ToolCall, ...]) -> None:
    """A reply the model could not form (see ``_UNFORMED``) without a call is a failed attempt
    like a malformed response: retried, never finished on as an empty answer."""
    if raw_reason in _UNFORMED and not calls:
        raise malformed_response(
            provider=PROVIDER, detail=f"finishReason is {raw_reason} but no tool call came"
        )
