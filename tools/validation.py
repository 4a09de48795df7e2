"""JSON Schema for tools: checking a tool's ``parameters_schema`` and validating a call's arguments.

Dialect: **JSON Schema Draft 2020-12**, the dialect of OpenAPI 3.1 and the one the OpenAI and
Anthropic tool-calling docs describe parameters in (``$defs``, ``prefixItems``). A schema may omit
``$schema``; if it names another dialect it is refused rather than silently validated differently.
``format`` is checked (``email``, ``date-time``, ...), so the seed's ``format: email`` means
something. ``$ref`` must stay inside the schema (``#/...``): nothing is ever fetched.

:func:`validate_arguments` never raises on bad arguments: it returns :class:`ArgumentError` items
that the runtime hands back to the model as a tool error, so the model can correct itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match
from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

__all__ = [
    "DIALECT",
    "ArgumentError",
    "InvalidToolSchema",
    "check_parameters_schema",
    "describe_argument_errors",
    "validate_arguments",
    "validator_for",
]

DIALECT = "https://json-schema.org/draft/2020-12/schema"
MAX_ERRORS = 20  # enough for the model to fix a call; more only bloats the context
MAX_MESSAGE_CHARS = 300  # jsonschema embeds the offending value, which can be huge
# Keywords whose values are data, not subschemas: a "$ref" key inside them is not a reference.
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})


class InvalidToolSchema(ValueError):
    """A tool's parameters schema is not usable. ``str(exc)`` is a message fit for a form field."""

    def __init__(self, message: str, *, path: str = "$") -> None:
        super().__init__(message)
        self.message = message
        self.path = path  # where in the schema the problem is


@dataclass(frozen=True, slots=True)
class ArgumentError:
    """One problem with a tool call's arguments, addressed the way the model wrote them."""

    path: str  # "$" is the arguments object itself, then ".field" / "[index]"
    message: str
    keyword: str  # the JSON Schema keyword that failed ("required", "type", ...)

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "message": self.message, "keyword": self.keyword}


def _json_path(parts: Sequence[str | int]) -> str:
    out = "$"
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.isidentifier():
            out += f".{part}"
        else:
            out += f"[{json.dumps(part)}]"
    return out


def _truncate(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 3] + "..."


def _refs(node: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[str, str]]:
    if isinstance(node, Mapping):
        for key, value in node.items():
            if key in ("$ref", "$dynamicRef") and isinstance(value, str):
                yield _json_path((*path, key)), value
            elif key not in _DATA_KEYWORDS:
                yield from _refs(value, (*path, key))
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _refs(item, (*path, index))


def _check_refs(schema: Mapping[str, Any]) -> None:
    resolver = Registry().resolver_with_root(DRAFT202012.create_resource(schema))
    for path, ref in _refs(schema):
        if not ref.startswith("#"):
            raise InvalidToolSchema(
                f"The parameters schema refers to {ref!r} at {path}; only references inside the "
                "schema ('#/$defs/...') are allowed.",
                path=path,
            )
        try:
            resolver.lookup(ref)
        except Unresolvable:
            raise InvalidToolSchema(
                f"The parameters schema refers to {ref!r} at {path}, which does not exist in "
                "the schema.",
                path=path,
            ) from None


def check_parameters_schema(schema: object) -> None:
    """Raise :class:`InvalidToolSchema` unless ``schema`` is a Draft 2020-12 schema of an object.

    Used wherever a tool's ``parameters_schema`` is written (admin form, API serializer, data
    migrations' tests), so a broken schema is a 400 on the field, never a failure at run time.
    """
    if not isinstance(schema, Mapping):
        raise InvalidToolSchema(
            f"The parameters schema must be a JSON object, not {type(schema).__name__}."
        )
    declared = schema.get("$schema")
    if declared is not None and str(declared).rstrip("#") != DIALECT:
        raise InvalidToolSchema(
            f"The parameters schema declares $schema {declared!r}; only JSON Schema Draft "
            f"2020-12 ({DIALECT}) is supported (or leave $schema out).",
            path="$.$schema",
        )
    try:
        json.dumps(schema, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidToolSchema(f"The parameters schema is not plain JSON: {exc}.") from None
    error = best_match(Draft202012Validator(Draft202012Validator.META_SCHEMA).iter_errors(schema))
    if error is not None:
        path = _json_path(list(error.absolute_path))
        raise InvalidToolSchema(
            f"The parameters schema is not valid JSON Schema (Draft 2020-12) at {path}: "
            f"{_truncate(error.message)}.",
            path=path,
        )
    if schema.get("type") != "object":
        raise InvalidToolSchema(
            'The parameters schema must describe an object: set "type": "object" at the top '
            "level (tool arguments are always a JSON object).",
            path="$.type",
        )
    _check_refs(schema)


@lru_cache(maxsize=512)
def _compiled(canonical: str) -> Draft202012Validator:
    return Draft202012Validator(
        json.loads(canonical), format_checker=Draft202012Validator.FORMAT_CHECKER
    )


def validator_for(schema: Mapping[str, Any]) -> Draft202012Validator:
    """A compiled validator for ``schema``, shared by every call with an equal schema.

    Keyed by the schema's canonical JSON, so an edited tool row gets a fresh validator and equal
    schemas loaded from different rows share one. Validators are stateless and thread-safe.
    """
    return _compiled(json.dumps(schema, sort_keys=True, separators=(",", ":")))


def _to_argument_error(error: ValidationError) -> ArgumentError:
    message = error.message
    if error.validator in ("oneOf", "anyOf") and error.context:
        # "... is not valid under any of the given schemas" alone gives the model nothing to fix.
        options = "; ".join(dict.fromkeys(sub.message for sub in error.context))
        wanted = "exactly one" if error.validator == "oneOf" else "at least one"
        message = f"must match {wanted} of these alternatives: {options}"
    return ArgumentError(
        path=_json_path(list(error.absolute_path)),
        message=_truncate(message),
        keyword=str(error.validator),
    )


def validate_arguments(schema: Mapping[str, Any], arguments: object) -> list[ArgumentError]:
    """Validate a tool call's arguments; an empty list means they are valid.

    ``schema`` is assumed to have passed :func:`check_parameters_schema`; if it nevertheless cannot
    be used (e.g. an unresolvable ``$ref``), that is reported as one error rather than raised.
    """
    try:
        errors = sorted(
            validator_for(schema).iter_errors(arguments),
            key=lambda e: (_json_path(list(e.absolute_path)), str(e.validator), e.message),
        )
    except Unresolvable as exc:
        return [
            ArgumentError(
                path="$",
                message=_truncate(
                    f"the tool's parameters schema is broken ({exc}); this call cannot be validated"
                ),
                keyword="$ref",
            )
        ]
    return [_to_argument_error(error) for error in errors[:MAX_ERRORS]]


def describe_argument_errors(tool_name: str, errors: Sequence[ArgumentError]) -> str:
    """The tool-error text for the model: a heading, then one ``- path: message`` line each."""
    lines = [f"- {error.path}: {error.message}" for error in errors]
    return f"Invalid arguments for tool '{tool_name}':\n" + "\n".join(lines)
