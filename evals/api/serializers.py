"""The evaluations' API bodies and answers (evals/api/views.py). Cases are JSON checked by the
services (evals.services.datasets.validate_case): a fault is a 400 naming it."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from agents.models import Agent
from core.api.fields import AgencyRelatedField, StrictSerializer
from evals.models import Dataset, Experiment, ExperimentResult, TestCase


class DatasetSerializer(serializers.ModelSerializer[Dataset]):
    current_version = serializers.IntegerField(
        source="current_version.number", read_only=True, allow_null=True
    )

    class Meta:
        model = Dataset
        fields = ["id", "name", "description", "agent", "current_version", "created_at"]
        read_only_fields = fields


class DatasetCreateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(required=False, allow_blank=True, max_length=2000)
    agent = AgencyRelatedField(queryset=Agent.objects.all(), required=False, allow_null=True)


class CaseSerializer(serializers.ModelSerializer[TestCase]):
    class Meta:
        model = TestCase
        fields = [
            "id", "key", "position", "name", "input", "trigger_type", "trigger_payload",
            "conversation", "recorded_calls", "expectations", "source_execution_id",
        ]  # fmt: skip
        read_only_fields = fields


class CaseWriteSerializer(StrictSerializer):
    """A case written by hand (README "Evaluations": the fields and the expectations)."""

    name = serializers.CharField(max_length=200)
    input = serializers.CharField(required=False, allow_blank=True, max_length=20_000)
    trigger_type = serializers.CharField(required=False, max_length=16)
    trigger_payload = serializers.DictField(required=False)
    conversation = serializers.ListField(required=False, child=serializers.DictField())
    recorded_calls = serializers.ListField(required=False, child=serializers.DictField())
    expectations = serializers.DictField(required=False)


class ImportSerializer(StrictSerializer):
    jsonl = serializers.CharField(help_text="One case per line, as the export gives them.")


class ExportSerializer(serializers.Serializer[Any]):
    version = serializers.IntegerField()
    jsonl = serializers.CharField()


class VersionSerializer(serializers.Serializer[Any]):
    dataset = serializers.UUIDField()
    version = serializers.IntegerField()
    cases = serializers.IntegerField()


class SaveCaseSerializer(StrictSerializer):
    dataset = AgencyRelatedField(queryset=Dataset.objects.all())
    name = serializers.CharField(required=False, allow_blank=True, max_length=200)


class ExperimentCreateSerializer(StrictSerializer):
    agent = AgencyRelatedField(queryset=Agent.objects.all())
    dataset = AgencyRelatedField(queryset=Dataset.objects.select_related("current_version"))
    version = serializers.IntegerField(
        required=False, min_value=1, help_text="The agent's version number; its current one."
    )


class ResultSerializer(serializers.ModelSerializer[ExperimentResult]):
    case_name = serializers.CharField(source="case.name", read_only=True)

    class Meta:
        model = ExperimentResult
        fields = [
            "case", "case_name", "execution", "status", "checks", "steps", "tokens_total",
            "cost_usd", "latency_ms", "unrecorded_calls", "loops_flagged", "judge_score",
            "judge_reason", "judge_cost_usd",
        ]  # fmt: skip
        read_only_fields = fields


class ExperimentSerializer(serializers.ModelSerializer[Experiment]):
    agent_version = serializers.IntegerField(
        source="agent_version.number", read_only=True, allow_null=True
    )
    dataset = serializers.UUIDField(source="dataset_version.dataset_id", read_only=True)
    dataset_version = serializers.IntegerField(source="dataset_version.number", read_only=True)
    pass_rate = serializers.FloatField(read_only=True)
    results = ResultSerializer(many=True, read_only=True)

    class Meta:
        model = Experiment
        fields = [
            "id", "agent", "agent_version", "dataset", "dataset_version", "status",
            "case_count", "passed_count", "pass_rate", "tokens_total", "cost_usd",
            "created_at", "finished_at", "results",
        ]  # fmt: skip
        read_only_fields = fields
