"""The arguments of one tool call as a Django form, one field per property of the tool's schema;
the tool validator's errors put back on their fields."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from django import forms
from django.utils.html import escape

from approvals.inbox.schema_form.fields import JSONTextField, LinesField, TextField
from approvals.inbox.schema_form.schema import (
    argument_label,
    field_order,
    infer_property,
    required_order,
    schema_from_arguments,
    type_of,
)

LONG_TEXT_NAMES = frozenset(
    {"body", "content", "message", "description", "text", "notes", "note", "prompt", "html"}
)
SHORT_TEXT_MAX = 200  # a string allowed to be longer than this gets a textarea
JSON_TYPES = ("object", "array")
_REQUIRED_MESSAGE = re.compile(r"^'(?P<name>[^']+)' is a required property")


class ArgumentsForm(forms.Form):
    """The arguments of one tool call, as a form. ``schema``: the tool's parameters schema (an
    object schema); ``arguments``: the proposed call, used as the initial values."""

    def __init__(
        self,
        schema: Mapping[str, Any] | None,
        arguments: Mapping[str, Any] | None = None,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        arguments = dict(arguments or {})
        if not isinstance(schema, Mapping) or not isinstance(schema.get("properties"), Mapping):
            schema = schema_from_arguments(arguments)
        kwargs.setdefault("initial", dict(arguments))
        super().__init__(*args, **kwargs)
        self.schema = schema
        self.proposed = arguments
        properties: dict[str, Any] = dict(schema["properties"])
        if schema.get("additionalProperties") is not False:
            for name, value in arguments.items():
                properties.setdefault(name, infer_property(value))
        self.required_names = set(required_order(schema))
        for name, declared in sorted(properties.items(), key=field_order(schema)):
            spec = declared if isinstance(declared, Mapping) else {}
            if type_of(spec) is None and "enum" not in spec and name in arguments:
                spec = {**infer_property(arguments[name]), **spec}  # untyped: as the value looks
            field = self.fields[name] = self._field(name, spec, arguments.get(name))
            if name in arguments and isinstance(field, JSONTextField | LinesField):
                # Shown as text: a JSON document, or one item per line.
                self.initial[name] = field.as_text(arguments[name])

    # --- building ------------------------------------------------------------------------------

    def _field(  # noqa: PLR0911 - one return per JSON type
        self, name: str, spec: Mapping[str, Any], value: Any
    ) -> forms.Field:
        required = name in self.required_names
        common: dict[str, Any] = {
            "required": required,
            "label": argument_label(name, {"properties": {name: spec}}),
            # Django's form templates print help texts unescaped: a schema's is text.
            "help_text": escape(str(spec.get("description") or "")),
        }
        kind = type_of(spec)
        enum = spec.get("enum")
        if isinstance(enum, list) and enum and kind in ("string", "integer", "number"):
            choices = [(json.dumps(v) if kind != "string" else v, str(v)) for v in enum]
            if not required:
                choices.insert(0, ("", "(not set)"))
            return forms.TypedChoiceField(
                choices=choices, coerce=_enum_coercer(kind), empty_value=None, **common
            )
        if kind == "string":
            return self._string_field(name, spec, value, common)
        if kind == "integer":
            return forms.IntegerField(
                min_value=_integer(spec.get("minimum")),
                max_value=_integer(spec.get("maximum")),
                **common,
            )
        if kind == "number":
            return forms.FloatField(
                min_value=_number(spec.get("minimum")),
                max_value=_number(spec.get("maximum")),
                **common,
            )
        if kind == "boolean":
            return forms.BooleanField(**{**common, "required": False})
        if kind == "array":
            items = spec.get("items")
            items = items if isinstance(items, Mapping) else {}
            item_type = type_of(items)
            item_enum = items.get("enum")
            if item_type == "string" and isinstance(item_enum, list) and item_enum:
                return forms.MultipleChoiceField(
                    choices=[(str(v), str(v)) for v in item_enum],
                    widget=forms.CheckboxSelectMultiple,
                    **common,
                )
            if item_type in ("string", "integer", "number") and _scalars(value):
                common["help_text"] = escape(
                    " ".join(filter(None, [str(spec.get("description") or ""), "One per line."]))
                )
                return LinesField(item_type=item_type, **common)
            return JSONTextField(expect="array", **common)
        return JSONTextField(expect=kind if kind in JSON_TYPES else None, **common)

    def _string_field(
        self, name: str, spec: Mapping[str, Any], value: Any, common: dict[str, Any]
    ) -> forms.Field:
        max_length = spec.get("maxLength")
        min_length = spec.get("minLength")
        lengths: dict[str, Any] = {
            "max_length": max_length if isinstance(max_length, int) else None,
            "min_length": min_length if isinstance(min_length, int) else None,
        }
        if spec.get("format") == "email":
            return forms.EmailField(**lengths, **common)
        multiline = isinstance(value, str) and "\n" in value  # a one-line input would lose it
        if spec.get("format") or (isinstance(max_length, int) and max_length <= SHORT_TEXT_MAX):
            long_text = multiline  # a date, a URL, a short code: one line
        else:
            long_text = (
                multiline
                or name.lower() in LONG_TEXT_NAMES
                or isinstance(max_length, int)
                or (isinstance(value, str) and len(value) > 80)
            )
        widget = forms.Textarea(attrs={"rows": 6}) if long_text else forms.TextInput
        return TextField(widget=widget, **lengths, **common)

    # --- reading -------------------------------------------------------------------------------

    def arguments(self) -> dict[str, Any]:
        """The cleaned values as the tool's JSON arguments: optional fields left empty are
        omitted (an optional checkbox too, unless the proposed call had it); order as proposed."""
        result: dict[str, Any] = {}
        for name, field in self.fields.items():
            value = self.cleaned_data.get(name)
            required = name in self.required_names
            if isinstance(field, forms.BooleanField):
                if required or value or name in self.proposed:
                    result[name] = bool(value)
                continue
            if isinstance(field, JSONTextField):
                if value is not None:
                    result[name] = value
                continue
            if value is None or value in ("", []):
                continue
            result[name] = value
        order = {name: i for i, name in enumerate(self.proposed)}
        return dict(sorted(result.items(), key=lambda item: order.get(item[0], len(order))))

    def add_argument_errors(self, errors: Sequence[Mapping[str, Any]]) -> None:
        """Put the tool validator's errors (``{"path": "$.to[0]", "message": ...}``) on their
        fields; an error about the whole call (or an unknown field) goes above the form."""
        for error in errors:
            path = str(error.get("path") or "$")
            message = str(error.get("message") or "Invalid value.")
            name, rest = _field_of(path)
            if name is None and error.get("keyword") in ("required", None):
                match = _REQUIRED_MESSAGE.match(message)
                name = match.group("name") if match else None
                rest = ""
            if name is not None and name in self.fields:
                self.add_error(name, _in_words(self.fields[name], rest, message))
            else:
                self.add_error(None, f"{path}: {message}" if path != "$" else message)


_ITEM = re.compile(r"^\[(\d+)\]")
_NOT_A_FORMAT = re.compile(r"^(?P<value>.*) is not a '(?P<format>[\w-]+)'$")
FORMAT_WORDS = {"email": "a valid e-mail address", "date-time": "a date and time", "uri": "a URL"}


def _in_words(field: forms.Field, rest: str, message: str) -> str:
    """A validator's error as a person reads it at the field: an item of a one-per-line field
    is its line (``[1]`` is line 2), and a format error names what was expected."""
    match = _NOT_A_FORMAT.match(message)
    if match:
        wanted = FORMAT_WORDS.get(match.group("format"), f"a valid {match.group('format')}")
        message = f"{match.group('value')} is not {wanted}"
    item = _ITEM.match(rest)
    if item and isinstance(field, LinesField):
        where = f"line {int(item.group(1)) + 1}"
        rest = rest[item.end() :]
        return f"{where}{rest}: {message}"
    return f"{rest}: {message}" if rest else message


def _field_of(path: str) -> tuple[str | None, str]:
    """``$.to[0]`` -> ("to", "[0]"); ``$["first name"].x`` -> ("first name", ".x"); ``$`` ->
    (None, "")."""
    rest = path[1:] if path.startswith("$") else path
    if rest.startswith("."):
        match = re.match(r"\.([^.\[]+)", rest)
        if match:
            return match.group(1), rest[match.end() :]
    if rest.startswith('["'):
        try:
            decoder = json.JSONDecoder()
            name, end = decoder.raw_decode(rest, 1)
        except json.JSONDecodeError:
            return None, rest
        if isinstance(name, str) and rest[end : end + 1] == "]":
            return name, rest[end + 1 :]
    return None, rest


def _number(value: Any) -> int | float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    return None


def _integer(value: Any) -> int | None:
    """An integer bound; a fractional one is left to the tool's validator."""
    number = _number(value)
    if number is None:
        return None
    return int(number) if float(number).is_integer() else None


def _scalars(value: Any) -> bool:
    """A proposed value that lines can show faithfully: absent, or a list of plain values."""
    if value is None:
        return True
    return isinstance(value, list) and all(
        (isinstance(item, str) and "\n" not in item)
        or (isinstance(item, int | float) and not isinstance(item, bool))
        for item in value
    )


def _enum_coercer(kind: str | None) -> Any:
    if kind == "string":
        return str
    return json.loads
