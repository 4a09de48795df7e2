"""A request body's values have the JSON types the OpenAPI schema gives them.

DRF fields coerce: a ``CharField`` takes ``0`` as ``"0"``, a ``BooleanField`` takes ``0``,
``"yes"`` and ``"on"``, an ``IntegerField`` takes ``"5"``, a ``DecimalField`` takes numbers,
``"1e3"`` and ``"0000001"``. The schema (drf-spectacular) documents none of that, so a client
generated from it, or one that sends a number where a name belongs, learned nothing from a 201.
:class:`core.api.fields.StrictSerializerMixin` checks every value of a body with
:func:`json_type_error` before DRF sees it; a decimal is the string the schema's pattern, built by
:func:`decimal_pattern` for both, describes.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from rest_framework import serializers


def decimal_pattern(field: serializers.DecimalField) -> str:
    """The strings a decimal field takes: no sign unless it may be negative, at least one digit
    before the point and one after it, no more digits than the field holds; up to an integer
    ``max_value`` below 10 (a ratio, a temperature), the range itself."""
    places = field.decimal_places or 0
    whole = field.max_whole_digits if field.max_whole_digits is not None else None
    fraction = rf"(?:\.\d{{1,{places}}})?" if places else ""
    sign = "" if field.min_value is not None and Decimal(field.min_value) >= 0 else "-?"
    top = field.max_value
    if not sign and top is not None and Decimal(top) == int(top) and 0 < int(top) < 10:
        zeros = rf"(?:\.0{{1,{places}}})?" if places else ""
        below = "0" if int(top) == 1 else f"[0-{int(top) - 1}]"
        return rf"^(?:{below}{fraction}|{int(top)}{zeros})$"
    digits = r"\d+" if whole is None else (r"0" if whole == 0 else rf"\d{{1,{whole}}}")
    return rf"^{sign}{digits}{fraction}$"


def _is_integer(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _decimal_error(field: serializers.DecimalField, value: Any) -> str | None:
    if not isinstance(value, str):
        return 'Must be a decimal number written as a string, e.g. "20.00".'
    pattern = decimal_pattern(field)
    return None if re.fullmatch(pattern, value) else f"Must be a decimal number matching {pattern}."


def _choice_error(field: serializers.ChoiceField, value: Any) -> str | None:
    # DRF matches str(value): 1 would pick the choice "1".
    if all(isinstance(key, str) for key in field.choices) and not isinstance(value, str):
        return "Must be one of the listed strings."
    return None


def _json_type(field: serializers.Field) -> str | None:
    """The JSON type of a value of ``field``, when one type is all it takes."""
    declared = getattr(field, "json_type", None)  # core.api.fields' JSON object and array
    if declared:
        return str(declared)
    for types, json_type in _JSON_TYPES:
        if isinstance(field, types):
            return json_type
    return None


# Checked in order: a MultipleChoiceField is a ChoiceField, a DecimalField is none of these.
_JSON_TYPES: list[tuple[Any, str]] = [
    ((serializers.MultipleChoiceField, serializers.ManyRelatedField), "array"),
    ((serializers.ListField, serializers.ListSerializer), "array"),
    ((serializers.BooleanField,), "boolean"),
    ((serializers.IntegerField,), "integer"),
    ((serializers.FloatField,), "number"),
    (
        (
            serializers.CharField,
            serializers.UUIDField,
            serializers.DateField,
            serializers.DateTimeField,
            serializers.TimeField,
            serializers.RelatedField,
        ),
        "string",
    ),
    ((serializers.DictField, serializers.Serializer), "object"),
]
_IS_TYPE = {
    "array": lambda value: isinstance(value, list),
    "boolean": lambda value: isinstance(value, bool),
    "integer": _is_integer,
    "number": _is_number,
    "string": lambda value: isinstance(value, str),
    "object": lambda value: isinstance(value, dict),
}
_MESSAGES = {
    "array": "Must be a JSON array.",
    "boolean": "Must be true or false.",
    "integer": "Must be an integer.",
    "number": "Must be a number.",
    "string": "Must be a string.",
    "object": "Must be a JSON object.",
}


def json_type_error(field: serializers.Field, value: Any) -> str | None:
    """Why ``value`` is not of the JSON type ``field`` documents, or None. ``null`` is left to the
    field (``allow_null``)."""
    if value is None:
        return None
    if isinstance(field, serializers.DecimalField):
        return _decimal_error(field, value)
    json_type = _json_type(field)
    if json_type is not None and not _IS_TYPE[json_type](value):
        return _MESSAGES[json_type]
    if isinstance(field, serializers.ChoiceField) and json_type != "array":
        return _choice_error(field, value)
    return None
