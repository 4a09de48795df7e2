"""The datasets' API bodies and answers (datasets/api/views.py)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from core.api.fields import StrictSerializer
from datasets.models import Dataset, DatasetResult


class ColumnSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    type = serializers.CharField()
    samples = serializers.ListField(child=serializers.CharField())
    description = serializers.CharField(allow_blank=True)


class DatasetSerializer(serializers.ModelSerializer[Dataset]):
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
    name = serializers.CharField(
        max_length=63, help_text="The SQL table name: lower case letters, digits and _."
    )
    format = serializers.ChoiceField(
        choices=["csv", "xlsx", "parquet"],
        required=False,
        help_text="By default, from the file name's extension.",
    )
    title = serializers.CharField(required=False, allow_blank=True, max_length=200)
    description = serializers.CharField(required=False, allow_blank=True, max_length=5000)


class CrmQuerySerializer(StrictSerializer):
    name = serializers.CharField(max_length=63)
    query = serializers.DictField(
        help_text='{"entity_type": "contacts", "filters": {...}, "fields": [...]}, as data_query '
        "takes them."
    )
    title = serializers.CharField(required=False, allow_blank=True, max_length=200)
    description = serializers.CharField(required=False, allow_blank=True, max_length=5000)


class DatasetUpdateSerializer(StrictSerializer):
    title = serializers.CharField(required=False, allow_blank=True, max_length=200)
    description = serializers.CharField(required=False, allow_blank=True, max_length=5000)
    columns = serializers.DictField(
        child=serializers.CharField(allow_blank=True, max_length=2000),
        required=False,
        help_text="Column name -> its description (columns not named keep theirs).",
    )


class ResultSerializer(serializers.ModelSerializer[DatasetResult]):
    class Meta:
        model = DatasetResult
        fields = [
            "id", "execution", "tool_call_id", "tool_name", "sql", "columns", "row_count",
            "truncated", "created_at",
        ]  # fmt: skip
        read_only_fields = fields
