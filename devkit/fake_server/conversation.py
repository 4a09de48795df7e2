"""The conversation-order rules the real APIs enforce on tool calls, so that a runtime bug that
sends results out of order, or leaves one out, fails against the fake as it would in production.

Each check returns the 400 message (worded like the real API's, naming the message at fault) or
None when the conversation is well formed.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from devkit.fake_server import google_request
from devkit.fake_server.script import Wire


def order_error(wire: Wire, body: dict[str, Any]) -> str | None:
    if wire == "google":
        return google_request.order_error(body)
    messages = body.get("messages")
    if not isinstance(messages, list):
        return "messages: field required (a list of messages)"
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            return f"messages.{index}: each message must be an object"
    if wire == "openai":
        return openai_order_error(messages)
    return anthropic_order_error(messages)


def _duplicates(ids: list[str]) -> list[str]:
    return [call_id for position, call_id in enumerate(ids) if call_id in ids[:position]]


def openai_order_error(messages: list[dict[str, Any]]) -> str | None:
    """Chat Completions: an assistant message with `tool_calls` is followed at once by one `tool`
    message per call id (no other message in between, none missing); a `tool` message answers
    a call of that assistant message."""
    open_index: int | None = None  # the assistant message whose calls are being answered
    expected: list[str] = []
    answered: list[str] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            problem = _tool_message_error(index, call_id, open_index, expected, answered)
            if problem:
                return problem
            answered.append(str(call_id))
            continue
        if open_index is not None:
            problem = _unanswered(open_index, expected, answered, next_index=index)
            if problem:
                return problem
            open_index = None
        calls = message.get("tool_calls") if role == "assistant" else None
        if calls:
            expected = [str(call.get("id")) for call in calls if isinstance(call, dict)]
            repeated = _duplicates(expected)
            if repeated:
                return (
                    f"Invalid parameter: messages.[{index}].tool_calls repeats the id "
                    f"{repeated[0]!r}; the ids of one message's tool_calls must be distinct."
                )
            open_index, answered = index, []
    if open_index is not None:
        return _unanswered(open_index, expected, answered, next_index=None)
    return None


def _tool_message_error(
    index: int, call_id: object, open_index: int | None, expected: list[str], answered: list[str]
) -> str | None:
    if open_index is None:
        return (
            f"Invalid parameter: messages with role 'tool' must be a response to a preceding "
            f"message with 'tool_calls' (messages.[{index}], tool_call_id {call_id!r})."
        )
    if call_id not in expected:
        return (
            f"Invalid parameter: messages.[{index}] has tool_call_id {call_id!r}, which is not "
            f"a call of the assistant message at messages.[{open_index}] (its calls: "
            f"{', '.join(expected)})."
        )
    if call_id in answered:
        return (
            f"Invalid parameter: messages.[{index}] answers tool_call_id {call_id!r} a second "
            f"time; each call gets exactly one 'tool' message."
        )
    return None


def _unanswered(
    open_index: int, expected: list[str], answered: list[str], *, next_index: int | None
) -> str | None:
    missing = [call_id for call_id in expected if call_id not in answered]
    if not missing:
        return None
    where = (
        "the conversation ends"
        if next_index is None
        else f"messages.[{next_index}] is not a 'tool' message"
    )
    return (
        f"An assistant message with 'tool_calls' must be followed by tool messages responding "
        f"to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        f"{', '.join(missing)} (assistant message messages.[{open_index}]; {where})."
    )


def anthropic_order_error(messages: list[dict[str, Any]]) -> str | None:
    """Messages: the user turn after an assistant turn with `tool_use` blocks holds a
    `tool_result` for each of their ids, and `tool_result` blocks come first in a user turn."""
    pending: list[str] = []  # tool_use ids of the previous assistant turn
    for index, message in enumerate(messages):
        content = message.get("content")
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        role = message.get("role")
        if role == "user":
            problem = _tool_results_error(index, blocks, pending)
            if problem:
                return problem
            pending = []
        elif role == "assistant":
            if pending:
                return _missing_results(index - 1, pending)
            pending = [str(b.get("id")) for b in blocks if b.get("type") == "tool_use"]
            repeated = _duplicates(pending)
            if repeated:
                return (
                    f"messages.{index}: `tool_use` ids must be unique; {repeated[0]} is repeated."
                )
    if pending:
        return _missing_results(len(messages) - 1, pending)
    return None


def _tool_results_error(index: int, blocks: list[dict[str, Any]], pending: list[str]) -> str | None:
    results: list[str] = []
    other: str | None = None  # the first block that is not a tool_result
    for position, block in enumerate(blocks):
        if block.get("type") != "tool_result":
            other = other or str(block.get("type"))
            continue
        if other is not None:
            return (
                f"messages.{index}.content.{position}: `tool_result` blocks must come first in "
                f"the user message's content, before any other block; this one follows a "
                f"`{other}` block."
            )
        tool_use_id = str(block.get("tool_use_id"))
        if tool_use_id not in pending:
            return (
                f"messages.{index}.content.{position}: unexpected `tool_use_id` found in "
                f"`tool_result` blocks: {tool_use_id}. Each `tool_result` block must have a "
                f"corresponding `tool_use` block in the previous message."
            )
        if tool_use_id in results:
            return (
                f"messages.{index}.content.{position}: a second `tool_result` for "
                f"{tool_use_id}; each `tool_use` block gets exactly one."
            )
        results.append(tool_use_id)
    return _missing_results(index - 1, pending, results)


def _missing_results(index: int, expected: list[str], answered: Collection[str] = ()) -> str | None:
    missing = [call_id for call_id in expected if call_id not in answered]
    if not missing:
        return None
    return (
        f"messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately "
        f"after: {', '.join(missing)}. Each `tool_use` block must have a corresponding "
        f"`tool_result` block in the next message."
    )
