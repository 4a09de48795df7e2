"""Serializer building blocks: strict bodies, bounded JSON objects, agency-scoped references,
and the error body's schema."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from django.core.validators import URLValidator
from django.db import models
from django.db.models import Model, Q, QuerySet
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.api.exceptions import RULE
from core.api.strict import json_type_error

DEFAULT_JSON_MAX_BYTES = 64 * 1024


def _value_errors(field: serializers.Field, value: Any) -> Any:
    """The type errors of ``value`` for ``field`` (items of a list, values of a dict too)."""
    problem = json_type_error(field, value)
    if problem:
        return [problem]
    child = getattr(field, "child", None)
    if isinstance(field, serializers.ListField) and child is not None and isinstance(value, list):
        items = {i: e for i, item in enumerate(value) if (e := _value_errors(child, item))}
        return items or None
    if isinstance(field, serializers.DictField) and child is not None and isinstance(value, dict):
        values = {str(k): e for k, item in value.items() if (e := _value_errors(child, item))}
        return values or None
    return None


class UrlField(serializers.URLField):
    """A URL the server can use: Django's URLValidator (host labels of at most 63 characters, a
    top-level domain, ...) takes less than the schema's ``format: uri``; what the schema takes
    and this does not is a rule it cannot state (422, core.api.exceptions)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.validators = [
            *(v for v in self.validators if not isinstance(v, URLValidator)),
            URLValidator(message=self.error_messages["invalid"], code=RULE),
        ]


class StrictSerializerMixin:
    """A body key that is not one of these fields is refused (400), never dropped, and a value of
    another JSON type is refused, never converted."""

    fields: Any
    # Model URL fields of a ModelSerializer become UrlField.
    serializer_field_mapping = {
        **serializers.ModelSerializer.serializer_field_mapping,
        models.URLField: UrlField,
    }

    def to_internal_value(self, data: Any) -> Any:
        errors: dict[str, Any] = {}
        if isinstance(data, Mapping):
            for key in data:
                field = self.fields.get(key)
                if field is None:
                    errors[str(key)] = ["Unknown field."]
                elif field.read_only:
                    errors[str(key)] = ["This field is read-only."]
                elif problem := _value_errors(field, data[key]):
                    errors[str(key)] = problem
        try:
            value = super().to_internal_value(data)  # type: ignore[misc]
        except serializers.ValidationError as exc:
            if errors and isinstance(exc.detail, Mapping):
                raise serializers.ValidationError({**exc.detail, **errors}) from None
            raise
        if errors:
            raise serializers.ValidationError(errors)
        return value


class StrictSerializer(StrictSerializerMixin, serializers.Serializer):
    pass


def documented[F: serializers.Field](base: type[F], schema: dict[str, Any], name: str) -> type[F]:
    """A subclass of ``base`` that the API schema shows as ``schema``: the rules a service checks
    on its value, stated for clients. (A class, not an instance: serializers copy their fields
    by constructing them again, which drops an instance's schema.)"""
    return extend_schema_field(schema)(type(name, (base,), {"__module__": base.__module__}))


@extend_schema_field({"type": "object", "additionalProperties": True})
class JSONObjectField(serializers.JSONField):
    """A JSON object of bounded size (serialized), e.g. a payload or trigger data."""

    json_type = "object"

    default_error_messages = {
        "not_object": "Must be a JSON object.",
        "too_large": "Must be at most {max_bytes} bytes as JSON.",
    }

    def __init__(self, *, max_bytes: int = DEFAULT_JSON_MAX_BYTES, **kwargs: Any) -> None:
        self.max_bytes = max_bytes
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> Any:
        value = super().to_internal_value(data)
        if not isinstance(value, dict):
            self.fail("not_object")
        if len(json.dumps(value, ensure_ascii=False).encode()) > self.max_bytes:
            self.fail("too_large", max_bytes=self.max_bytes)
        return value


@extend_schema_field({"type": "array", "items": {}})
class JSONListField(serializers.JSONField):
    """A JSON array of bounded size (agent constraints, examples)."""

    json_type = "array"

    default_error_messages = {
        "not_list": "Must be a JSON array.",
        "too_large": "Must be at most {max_bytes} bytes as JSON.",
    }

    def __init__(self, *, max_bytes: int = DEFAULT_JSON_MAX_BYTES, **kwargs: Any) -> None:
        self.max_bytes = max_bytes
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> Any:
        value = super().to_internal_value(data)
        if not isinstance(value, list):
            self.fail("not_list")
        if len(json.dumps(value, ensure_ascii=False).encode()) > self.max_bytes:
            self.fail("too_large", max_bytes=self.max_bytes)
        return value


class AgencyRelatedField(serializers.PrimaryKeyRelatedField):
    """A reference (by UUID) to a row of the request's agency; another agency's id does not
    exist. ``include_shared``: platform rows (``agency`` NULL, e.g. system templates) too."""

    def __init__(self, *, include_shared: bool = False, **kwargs: Any) -> None:
        self.include_shared = include_shared
        kwargs.setdefault("pk_field", serializers.UUIDField())
        super().__init__(**kwargs)

    def get_queryset(self) -> QuerySet[Model]:
        queryset: QuerySet[Model] = super().get_queryset()  # type: ignore[assignment]
        view = self.context.get("view")
        principal = getattr(view, "principal", None)
        if principal is not None and principal.agency_id is not None:
            own = Q(agency_id=principal.agency_id)
            queryset = queryset.filter(own | Q(agency__isnull=True) if self.include_shared else own)
        return queryset

    def run_validation(self, data: Any = serializers.empty) -> Any:
        # RelatedField takes "" for null: the schema's uuid does not.
        if data == "":
            self.fail("incorrect_type", data_type="empty string")
        return super().run_validation(data)

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str):
            self.fail("incorrect_type", data_type=type(data).__name__)
        return super().to_internal_value(data)


class ErrorSerializer(serializers.Serializer):
    """Every API error: what went wrong, a stable code, and details (``extra.fields``: field
    errors)."""

    message = serializers.CharField()
    code = serializers.CharField()
    extra = serializers.DictField(child=serializers.JSONField())
