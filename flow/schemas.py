"""JSON Schemas of an expected workflow's definition (seed 003
``agent_workflow_pattern_definitions``): the states a run goes through, the actions (tools) it
takes and the transitions between states, each with a required flag. Checked when staff save a
workflow (``ExpectedWorkflow.clean``)."""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from agents.models import ExecutionStatus

STATES = sorted(ExecutionStatus.values)

EXPECTED_STATES: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "state": {"enum": STATES},
            "is_required": {"type": "boolean"},
            # Longer than this in the state: the run is flagged as stuck (flow.stuck).
            "max_duration_seconds": {"type": "integer", "minimum": 1},
        },
        "required": ["state"],
        "additionalProperties": False,
    },
}

EXPECTED_ACTIONS: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            # A tool name, or a wildcard pattern (tools/patterns.py: "crm_*").
            "action": {"type": "string", "minLength": 1, "maxLength": 200},
            "is_required": {"type": "boolean"},
            "min_count": {"type": "integer", "minimum": 0},
            "max_count": {"type": "integer", "minimum": 1},
        },
        "required": ["action"],
        "additionalProperties": False,
    },
}

EXPECTED_TRANSITIONS: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "from": {"enum": STATES},
            "to": {"enum": STATES},
            "is_required": {"type": "boolean"},
        },
        "required": ["from", "to"],
        "additionalProperties": False,
    },
}


def schema_error(schema: dict[str, Any], value: Any) -> str | None:
    """The most relevant error of ``value`` against ``schema``, said for a person; None if valid."""
    error = best_match(Draft202012Validator(schema).iter_errors(value))
    if error is None:
        return None
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return f"{where.lstrip('.') or 'value'}: {error.message}"
