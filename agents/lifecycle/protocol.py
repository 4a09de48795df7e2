"""The live events of an execution (docs/live-protocol.md): the payloads a watcher of an
execution or of an agency's dashboard receives when a step or a status change commits. One
module builds every payload, for the lifecycle's broadcasts and for live's catch-up read from
the database alike, so a replayed event is byte-for-byte the one that was broadcast. It sits
below the runtime and imports nothing of the apps: the runtime and the lifecycle publish with
it, ``live`` (the sockets: close codes, snapshots) reads it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Literal, TypedDict

# Channels message types (the ``type`` of a group message, dispatched to a consumer method).
GROUP_EVENT = "execution.event"  # a sequenced event, sent after its transaction commits
GROUP_TOKEN = "execution.token"  # noqa: S105 - a message type: streamed model text, not persisted

# How much of a step's text and of a tool's arguments and result an event carries; the
# execution's page links to the whole step.
TEXT_LIMIT = 2000
JSON_LIMIT = 4000


class StepData(TypedDict):
    step_number: int
    step_type: str  # observe | think | act | reflect
    text: str
    model: str
    tool_name: str
    tool_call_id: str
    tool_input: Any  # the arguments (JSON), cut to JSON_LIMIT characters as text if longer
    tool_output: Any  # the result (JSON), likewise
    failed: bool  # an act step whose tool reported an error
    error: str  # that error's message
    tokens_input: int
    tokens_output: int
    cost_usd: str  # decimal as text
    duration_ms: int | None
    started_at: str | None  # ISO 8601
    completed_at: str | None


class StatusData(TypedDict):
    from_status: str  # "" for a new run
    to_status: str
    reason: str


class ExecutionEvent(TypedDict):
    """A sequenced event of one execution, as the group carries it and the client receives it
    (the group's ``type`` becomes the event's kind for the client: ``step`` or ``status``)."""

    type: str  # GROUP_EVENT on the group; "step" / "status" on the socket
    kind: Literal["step", "status"]
    seq: int
    execution_id: str
    agent_id: str
    status: str  # the execution's status after this event
    data: StepData | StatusData


class TokenEvent(TypedDict):
    """Text of a model call in progress, as the group carries it (never persisted, never
    replayed): a delta, or several deltas joined, in the order the model produced them. The
    call's reply arrives later as the ``step`` event of ``step_number``, which replaces what was
    streamed; a call that fails or is retried leaves its streamed text without a step."""

    type: str  # GROUP_TOKEN
    execution_id: str
    step_number: int  # the number the think step will have when the call's reply is persisted
    text: str


def token_event(*, execution_id: str, step_number: int, text: str = "") -> TokenEvent:
    return {
        "type": GROUP_TOKEN,
        "execution_id": execution_id,
        "step_number": step_number,
        "text": text,
    }


def clip_text(text: str, limit: int = TEXT_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def clip_json(value: Any, limit: int = JSON_LIMIT) -> Any:
    """``value`` itself when its JSON is short, else its JSON text cut to ``limit``."""
    if value is None:
        return None
    text = json.dumps(value, default=str)
    return value if len(text) <= limit else clip_text(text, limit)


def iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def step_data(step: Mapping[str, Any]) -> StepData:
    """The event of one step from its column values (the runtime's insert, or a row read back)."""
    output = step.get("tool_output")
    failed = isinstance(output, Mapping) and bool(output.get("error"))
    error = output.get("error") if failed and isinstance(output, Mapping) else ""
    if isinstance(error, Mapping):  # a structured error: {"code", "message"}
        error = str(error.get("message") or error.get("code") or error)
    text = step.get("output_text") or step.get("reasoning") or step.get("input_text") or ""
    return {
        "step_number": int(step["step_number"]),
        "step_type": str(step["step_type"]),
        "text": clip_text(str(text)),
        "model": step.get("model") or "",
        "tool_name": step.get("tool_name") or "",
        "tool_call_id": step.get("tool_call_id") or "",
        "tool_input": clip_json(step.get("tool_input")),
        "tool_output": clip_json(output),
        "failed": failed,
        "error": clip_text(str(error or "")),
        "tokens_input": int(step.get("tokens_input") or 0),
        "tokens_output": int(step.get("tokens_output") or 0),
        "cost_usd": str(step.get("cost_usd") or Decimal(0)),
        "duration_ms": step.get("duration_ms"),
        "started_at": iso(step.get("started_at")),
        "completed_at": iso(step.get("completed_at")),
    }


def status_data(*, from_status: str, to_status: str, reason: str) -> StatusData:
    return {"from_status": from_status, "to_status": to_status, "reason": reason}
