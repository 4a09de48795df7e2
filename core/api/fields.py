"""Serializer building blocks: strict bodies, bounded JSON objects, agency-scoped references,
and the error body's schema."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from django.db.models import Model, Q, QuerySet
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

DEFAULT_JSON_MAX_BYTES = 64 * 1024


class StrictSerializerMixin:
    """A body key that is not a writable field is a 400 on that key, never silently dropped."""

    fields: Any

    def to_internal_value(self, data: Any) -> Any:
        errors: dict[str, list[str]] = {}
        if isinstance(data, Mapping):
            for key in data:
                field = self.fields.get(key)
                if field is None:
                    errors[str(key)] = ["Unknown field."]
                elif field.read_only:
                    errors[str(key)] = ["This field is read-only."]
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


@extend_schema_field({"type": "object", "additionalProperties": True})
class JSONObjectField(serializers.JSONField):
    """A JSON object of bounded size (serialized), e.g. a payload or trigger data."""

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

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, bool) or not isinstance(data, str | int):
            self.fail("incorrect_type", data_type=type(data).__name__)
        return super().to_internal_value(data)


class ErrorSerializer(serializers.Serializer):
    """Every API error: what went wrong, a stable code, and details (``extra.fields``: field
    errors)."""

    message = serializers.CharField()
    code = serializers.CharField()
    extra = serializers.DictField(child=serializers.JSONField())
