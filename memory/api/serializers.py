"""Serializers of memories: what is read (no vectors), a create body, the search parameters."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.api.fields import JSONObjectField, StrictSerializer
from memory import search, validation
from memory.models import Memory, MemoryType


class MemorySerializer(serializers.ModelSerializer):
    score = serializers.SerializerMethodField(
        help_text="The search's blend of similarity, words, importance, recency and confidence "
        "(0..1); null when listing without `q`."
    )
    similarity = serializers.SerializerMethodField(
        help_text="Cosine similarity to `q`; null without `q` or when the memory was found by "
        "its words only (its embedding pending)."
    )
    embedded = serializers.SerializerMethodField(
        help_text="Whether the memory has an embedding yet (made after the request that stored "
        "it); until then it is found by its words."
    )

    class Meta:
        model = Memory
        fields = [
            "id",
            "agent",
            "execution",
            "memory_type",
            "subject_type",
            "subject_id",
            "content",
            "embedding_model",
            "embedded",
            "confidence",
            "source",
            "tags",
            "metadata",
            "importance",
            "access_count",
            "last_accessed_at",
            "expires_at",
            "created_at",
            "updated_at",
            "score",
            "similarity",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_score(self, memory: Memory) -> float | None:
        return getattr(memory, "search_score", None)

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_similarity(self, memory: Memory) -> float | None:
        return getattr(memory, "similarity", None)

    @extend_schema_field(OpenApiTypes.BOOL)
    def get_embedded(self, memory: Memory) -> bool:
        return bool(memory.embedding_model)


class MemoryCreateSerializer(StrictSerializer):
    content = serializers.CharField(max_length=validation.CONTENT_MAX_CHARS)
    memory_type = serializers.ChoiceField(choices=MemoryType.choices)
    subject_type = serializers.CharField(
        max_length=validation.SUBJECT_TYPE_MAX_CHARS, required=False, allow_blank=True, default=""
    )
    subject_id = serializers.UUIDField(required=False, allow_null=True, default=None)
    confidence = serializers.DecimalField(
        max_digits=3,
        decimal_places=2,
        min_value=Decimal("0"),
        max_value=Decimal("1"),
        required=False,
        allow_null=True,
        default=None,
    )
    importance = serializers.IntegerField(min_value=1, max_value=10, required=False, default=5)
    tags = serializers.ListField(
        child=serializers.CharField(max_length=validation.TAG_MAX_CHARS),
        max_length=validation.MAX_TAGS,
        required=False,
        default=list,
    )
    expires_at = serializers.DateTimeField(required=False, allow_null=True, default=None)
    # The memory's "source" (where it came from), not DRF's Field.source the stubs know.
    source = serializers.CharField(  # type: ignore[assignment]
        max_length=validation.SOURCE_MAX_CHARS, required=False, allow_blank=True, default="api"
    )
    metadata = JSONObjectField(
        max_bytes=validation.METADATA_MAX_BYTES, required=False, default=dict
    )


def _types(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


class MemorySearchParams(serializers.Serializer):
    """Query parameters of a search (``q`` given)."""

    q = serializers.CharField(max_length=search.QUERY_MAX_CHARS, trim_whitespace=True)
    k = serializers.IntegerField(min_value=1, max_value=search.MAX_K, required=False, default=10)
    type = serializers.ListField(
        child=serializers.ChoiceField(choices=MemoryType.choices), required=False, default=list
    )
    subject_type = serializers.CharField(
        max_length=validation.SUBJECT_TYPE_MAX_CHARS, required=False, allow_blank=True, default=""
    )
    subject_id = serializers.UUIDField(required=False, allow_null=True, default=None)

    def to_internal_value(self, data: Any) -> Any:
        # ?type=fact&type=preference and ?type=fact,preference alike; memory_type as in the list.
        if hasattr(data, "getlist"):
            given = [*data.getlist("type"), *data.getlist("memory_type")]
            data = {key: data.get(key) for key in data if key not in ("type", "memory_type")}
            data["type"] = [item for value in given for item in _types(value)]
        return super().to_internal_value(data)
