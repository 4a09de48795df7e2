"""The matching rule of an experiment's tool calls (README "Evaluations"): a call is answered
from the case's recording when a recorded call has the same tool name and the same arguments
after JSON canonicalisation (keys sorted at every depth, no insignificant white space, numbers
as JSON writes them: ``1`` and ``1.0`` differ, ``{"a": 1, "b": 2}`` and ``{"b": 2, "a": 1}`` do
not). The first such recorded call gives the answer, so a call repeated with the same arguments
gets the same answer. Any other call is unrecorded: refused, never run."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, TypedDict


class RecordedCall(TypedDict):
    tool: str
    arguments: dict[str, Any]
    output: dict[str, Any]
    status: str


def canonical(arguments: Any) -> str:
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def index(calls: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], RecordedCall]:
    """The recording by (tool, canonical arguments); the first of equal calls wins."""
    found: dict[tuple[str, str], RecordedCall] = {}
    for call in calls:
        key = (str(call["tool"]), canonical(call.get("arguments") or {}))
        found.setdefault(key, call)  # type: ignore[arg-type]
    return found


def validate_recorded_calls(value: Any) -> str | None:
    """What is wrong with ``value`` as ``TestCase.recorded_calls``, or None."""
    if not isinstance(value, list):
        return "recorded_calls: a list is expected."
    for i, call in enumerate(value):
        if not isinstance(call, dict) or not isinstance(call.get("tool"), str):
            return f'recorded_calls[{i}]: an object with "tool" (a name) is expected.'
        for key in ("arguments", "output"):
            if not isinstance(call.get(key, {}), dict):
                return f"recorded_calls[{i}].{key}: a JSON object is expected."
        if not isinstance(call.get("status", "completed"), str):
            return f"recorded_calls[{i}].status: a text is expected."
    return None
