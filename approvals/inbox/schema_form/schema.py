"""Reading a tool's JSON Schema for the arguments form: a property's type, a schema inferred from
arguments when the tool has none (or for arguments it does not name), and the order of fields."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from django.forms.utils import pretty_name

# Parts of an argument's name a person reads in capitals ("template_id" -> "Template ID").
ACRONYMS = {
    word: word.upper()
    for word in ("id", "url", "uri", "api", "crm", "sms", "html", "ip", "llm", "utc")
} | {"ids": "IDs", "urls": "URLs"}


def type_of(spec: Mapping[str, Any]) -> str | None:
    """The property's JSON type: the first non-null one of a list; ``string`` for a bare enum
    of strings; None when the schema does not say."""
    kind = spec.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    enum = spec.get("enum")
    if kind is None and isinstance(enum, list) and all(isinstance(v, str) for v in enum):
        return "string"
    return kind if isinstance(kind, str) else None


def infer_property(value: Any) -> dict[str, Any]:
    """A property schema that fits ``value`` (for tools without a schema, and extra arguments)."""
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer"}
    if isinstance(value, float):
        return {"type": "number"}
    if isinstance(value, str):
        return {"type": "string"}
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return {"type": "array", "items": {"type": "string"}}
    return {}  # an object, a mixed list, null: edited as JSON


def argument_label(name: str, schema: Mapping[str, Any] | None = None) -> str:
    """What an approver reads for the argument ``name``: the ``title`` the tool's schema gives
    its property, else the name in words ("template_id" -> "Template ID", "startTime" ->
    "Start time"), never the raw name."""
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    spec = properties.get(name) if isinstance(properties, Mapping) else None
    title = spec.get("title") if isinstance(spec, Mapping) else None
    if isinstance(title, str) and title.strip():
        return title.strip()
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name)  # camelCase
    words = pretty_name(spaced.replace("-", " ")).split()
    return (
        " ".join(
            ACRONYMS.get(w.lower()) or (w if i == 0 else w.lower()) for i, w in enumerate(words)
        )
        or name
    )


def schema_from_arguments(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """An object schema inferred from arguments (every one required, as it was sent)."""
    return {
        "type": "object",
        "properties": {name: infer_property(value) for name, value in arguments.items()},
        "required": list(arguments),
    }


def required_order(schema: Mapping[str, Any] | None) -> list[str]:
    """The schema's required property names, in its order."""
    required = schema.get("required") if isinstance(schema, Mapping) else None
    return (
        [name for name in required if isinstance(name, str)] if isinstance(required, list) else []
    )


def field_order(schema: Mapping[str, Any] | None) -> Any:
    """Sort key for properties: the required ones first, in the order the schema lists them
    (a list keeps its order; PostgreSQL's jsonb does not keep an object's keys in theirs)."""
    required = required_order(schema)

    def key(item: tuple[str, Any]) -> int:
        return required.index(item[0]) if item[0] in required else len(required)

    return key
