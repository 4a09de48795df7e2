"""The datasets' API bodies and answers (datasets/api/views.py)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.api.fields import StrictSerializer
from datasets.models import DATASET_NAME_REGEX, Dataset, DatasetResult
from tools.builtin._entities import ALL_OPERATORS, ENTITIES


class ColumnSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    type = serializers.CharField()
    samples = serializers.ListField(child=serializers.CharField())
    description = serializers.CharField(allow_blank=True)


class AnalysisDatasetSerializer(serializers.ModelSerializer[Dataset]):
    table = serializers.SerializerMethodField()
    columns = ColumnSerializer(many=True, read_only=True)

    class Meta:
        model = Dataset
        fields = [
            "id", "name", "table", "title", "description", "source", "file_format",
            "original_name", "size_bytes", "row_count", "columns", "query", "created_at",
            "updated_at",
        ]  # fmt: skip
        read_only_fields = fields

    def get_table(self, dataset: Dataset) -> str:
        return f"datasets.{dataset.name}"


class UploadSerializer(StrictSerializer):
    file = serializers.FileField(help_text="CSV, XLSX (its first sheet) or Parquet.")
    name = serializers.RegexField(
        DATASET_NAME_REGEX, help_text="The SQL table name: lower case letters, digits and _."
    )
    format = serializers.ChoiceField(
        choices=["csv", "xlsx", "parquet"],
        required=False,
        help_text="By default, from the file name's extension.",
    )
    title = serializers.CharField(required=False, allow_blank=True, max_length=200)
    description = serializers.CharField(required=False, allow_blank=True, max_length=5000)


_NO_NUL = r"^[^\x00]*$"
_SCALAR: dict[str, Any] = {
    "nullable": True,
    "anyOf": [{"type": "string", "pattern": _NO_NUL}, {"type": "number"}, {"type": "boolean"}],
}
_OPERAND: dict[str, Any] = {
    "anyOf": [_SCALAR, {"type": "array", "items": _SCALAR, "maxItems": 100}]
}


@extend_schema_field(_OPERAND)
class OperandField(serializers.JSONField):
    """A filter's value: a scalar, null, or a list of scalars."""


class FilterSerializer(StrictSerializer):
    field = serializers.CharField(max_length=100)
    op = serializers.ChoiceField(choices=list(ALL_OPERATORS))
    value = OperandField(allow_null=True)


class CrmQueryBodySerializer(StrictSerializer):
    """What data_query takes: an entity type, its filters, the fields to keep (all by default)."""

    entity_type = serializers.ChoiceField(choices=sorted(ENTITIES))
    filters = FilterSerializer(
        many=True, required=False, help_text="All must hold; as data_query's {field: {op: value}}."
    )

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        # "fields", as data_query names it, is a Serializer attribute: added here instead.
        found = dict(super().get_fields())
        found["fields"] = serializers.ListField(
            child=serializers.CharField(max_length=100), required=False, max_length=100
        )
        return found


def as_data_query(query: dict[str, Any]) -> dict[str, Any]:
    """A validated query's typed filters list as data_query's ``{field: {op: value}}``."""
    filters: dict[str, dict[str, Any]] = {}
    for item in query.get("filters") or []:
        filters.setdefault(item["field"], {})[item["op"]] = item["value"]
    converted = {"entity_type": query["entity_type"], "filters": filters}
    if "fields" in query:
        converted["fields"] = query["fields"]
    return converted


class CrmQuerySerializer(StrictSerializer):
    name = serializers.RegexField(DATASET_NAME_REGEX, help_text="The SQL table name.")
    query = CrmQueryBodySerializer()
    title = serializers.CharField(required=False, allow_blank=True, max_length=200)
    description = serializers.CharField(required=False, allow_blank=True, max_length=5000)


class ColumnDescriptionSerializer(StrictSerializer):
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(allow_blank=True, max_length=2000)


class DatasetUpdateSerializer(StrictSerializer):
    title = serializers.CharField(required=False, allow_blank=True, max_length=200)
    description = serializers.CharField(required=False, allow_blank=True, max_length=5000)
    columns = ColumnDescriptionSerializer(
        many=True,
        required=False,
        help_text="Columns' descriptions (columns not named keep theirs).",
    )


class TableResultSerializer(serializers.ModelSerializer[DatasetResult]):
    class Meta:
        model = DatasetResult
        fields = [
            "id", "execution", "tool_call_id", "tool_name", "sql", "columns", "row_count",
            "truncated", "created_at",
        ]  # fmt: skip
        read_only_fields = fields
