"""An agent's declared inputs (``AgentConfig.input_schema``): a JSON Schema of the structured
data a caller gives a manual run (the API's ``execute``, an MCP tool call, an A2A message's data
part), so that other systems know what to send and a run never starts on data it cannot use.

``{}`` declares nothing: a run takes an instruction and any trigger data, as before. A declared
schema is an object schema (JSON Schema 2020-12) whose properties are the inputs, e.g.
``{"type": "object", "properties": {"client": {"type": "string"}}, "required": ["client"]}``.
It is checked when saved (:func:`validate_input_schema`) and a manual run's data against it when
the run is asked for (:func:`input_error`); the run's model is given the declared inputs of its
data after its instruction (``agents.runtime.context``). Event, schedule and webhook runs carry
their own payloads and are not checked against it.

Names the protocols use next to the inputs (``input``, the instruction; ``wait_seconds``) and
names starting with ``_`` (the platform's own trigger data, ``_via``) cannot be declared.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError, ValidationError, best_match

RESERVED_NAMES = frozenset({"input", "wait_seconds"})
MAX_SCHEMA_CHARS = 20_000
MAX_DEPTH = 12
_REFERENCES = ("$ref", "$dynamicRef")


class InvalidInputSchema(ValueError):
    """The declared schema is unusable; ``messages`` says why, one message per problem."""

    def __init__(self, messages: list[str]) -> None:
        super().__init__("; ".join(messages))
        self.messages = messages


def _depth(value: Any, level: int = 0) -> int:
    if level > MAX_DEPTH:
        return level
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level)
    return level


def _remote_references(value: Any) -> list[str]:
    """``$ref`` values that point outside the schema (a URL or a file: never fetched)."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key in _REFERENCES and not (isinstance(item, str) and item.startswith("#")):
                found.append(str(item)[:100])
            else:
                found += _remote_references(item)
    elif isinstance(value, list):
        for item in value:
            found += _remote_references(item)
    return found


def validate_input_schema(schema: Any) -> None:
    """Raise :class:`InvalidInputSchema` unless ``schema`` is ``{}`` or an object schema whose
    properties may be declared inputs."""
    if not isinstance(schema, dict):
        raise InvalidInputSchema(["The input schema must be a JSON object ({} declares none)."])
    if not schema:
        return
    if len(json.dumps(schema, default=str)) > MAX_SCHEMA_CHARS:
        raise InvalidInputSchema([f"At most {MAX_SCHEMA_CHARS} characters of JSON."])
    if _depth(schema) > MAX_DEPTH:
        raise InvalidInputSchema([f"Nested at most {MAX_DEPTH} levels deep."])
    if schema.get("type") != "object":
        raise InvalidInputSchema(['The inputs are an object: "type": "object".'])
    properties = schema.get("properties", {})
    if not isinstance(properties, dict) or not properties:
        raise InvalidInputSchema(['Name the inputs under "properties".'])
    messages = [
        f"{name!r} cannot be declared: "
        + ("names starting with _ are the platform's." if name.startswith("_") else "reserved.")
        for name in properties
        if name in RESERVED_NAMES or name.startswith("_")
    ]
    messages += [
        f"Only references inside the schema (#...): {ref!r}." for ref in _remote_references(schema)
    ]
    if messages:
        raise InvalidInputSchema(messages)
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise InvalidInputSchema([f"Not a valid JSON Schema: {_located(exc)}"]) from None


def _located(error: ValidationError | SchemaError) -> str:
    """``where: message``, ``where`` the failing value's path joined by ``/`` (none at the top)."""
    where = "/".join(str(part) for part in error.absolute_path)
    return f"{where + ': ' if where else ''}{error.message}"


def first_error(schema: dict[str, Any], instance: Any) -> str | None:
    """The most relevant reason ``instance`` does not match ``schema`` (JSON Schema 2020-12),
    located, for a caller to read; ``None`` when it matches."""
    error = best_match(jsonschema.Draft202012Validator(schema).iter_errors(instance))
    return None if error is None else _located(error)


def input_error(schema: dict[str, Any] | None, data: dict[str, Any]) -> str | None:
    """Why ``data`` (a run's trigger data, as the caller gave it) does not match the declared
    ``schema``, for the caller (the first problem); ``None`` when it does or none is declared."""
    if not schema:
        return None
    try:
        return first_error(schema, data)
    except Exception as exc:  # a schema saved before a rule existed: say so, start nothing
        return f"The agent's input schema cannot be checked: {exc}"
