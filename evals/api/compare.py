"""``GET /api/v1/experiments/compare/?ids=a,b``: experiments of one dataset side by side, with
the figures, per-case outcomes and trend the admin's results page shows (evals.compare)."""

from __future__ import annotations

import re
import uuid
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from core.api.base import TenantScopedView
from core.exceptions import ApplicationError
from evals.compare import MAX_COMPARED, CaseOutcome, Figures, compare
from evals.models import Experiment

_UUID = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
IDS_PATTERN = f"^{_UUID}(,{_UUID}){{1,{MAX_COMPARED - 1}}}$"


class FiguresSerializer(serializers.Serializer[Any]):
    id = serializers.UUIDField(source="experiment.id")
    agent = serializers.UUIDField(source="experiment.agent_id")
    agent_version = serializers.IntegerField(
        source="experiment.agent_version.number", allow_null=True, default=None
    )
    kind = serializers.CharField(source="experiment.kind")
    # A declared field (DRF's metaclass takes it out of the class), not Field.label.
    label = serializers.CharField(help_text='"Version 3", "Draft of version 3"')  # type: ignore[assignment]
    status = serializers.CharField(source="experiment.status")
    created_at = serializers.DateTimeField(source="experiment.created_at")
    case_count = serializers.IntegerField(source="experiment.case_count")
    cases_done = serializers.IntegerField()
    pass_rate = serializers.FloatField(help_text="Of the cases done, 0 to 1.")
    cost_per_case_usd = serializers.DecimalField(
        max_digits=12, decimal_places=6, allow_null=True, help_text="Of the cases that ran."
    )
    latency_p50_ms = serializers.IntegerField(allow_null=True)
    latency_p95_ms = serializers.IntegerField(allow_null=True)
    steps_mean = serializers.FloatField(allow_null=True)
    tokens_mean = serializers.FloatField(allow_null=True)
    judge_score_mean = serializers.FloatField(allow_null=True)
    loops_flagged = serializers.IntegerField(help_text="Loops caught in its runs, all cases.")
    best = serializers.ListField(
        child=serializers.CharField(),
        help_text="The figures this experiment is best at among those compared.",
    )


class CallSerializer(serializers.Serializer[Any]):
    tool = serializers.CharField()
    arguments = serializers.CharField(help_text="Compact JSON, cut at 80 characters.")
    status = serializers.CharField()


class OutcomeSerializer(serializers.Serializer[Any]):
    status = serializers.CharField()
    failed_checks = serializers.ListField(child=serializers.DictField())
    calls = CallSerializer(many=True)
    output = serializers.CharField(allow_blank=True)
    execution = serializers.UUIDField(source="execution_id", allow_null=True)
    judge_score = serializers.FloatField(allow_null=True)


class CaseRowSerializer(serializers.Serializer[Any]):
    key = serializers.UUIDField()
    name = serializers.CharField()
    differs = serializers.BooleanField(help_text="The versions did not all end the same.")
    outcomes = serializers.ListField(
        child=OutcomeSerializer(allow_null=True),
        help_text="One per experiment, in the order of `experiments` (null: not in its cases).",
    )


class ComparisonSerializer(serializers.Serializer[Any]):
    dataset = serializers.UUIDField()
    experiments = FiguresSerializer(many=True)
    cases = CaseRowSerializer(many=True)
    trend = FiguresSerializer(
        many=True, help_text="The dataset's completed experiments of these agents, oldest first."
    )


def _outcome(outcome: CaseOutcome | None) -> dict[str, Any] | None:
    return None if outcome is None else dict(OutcomeSerializer(outcome).data)


def _figures(found: list[Figures]) -> list[dict[str, Any]]:
    return [{**FiguresSerializer(f).data, "best": sorted(f.best)} for f in found]


class ExperimentCompare(TenantScopedView):
    @extend_schema(
        operation_id="experiments_compare",
        summary="Experiments of one dataset side by side (2 to 6)",
        parameters=[
            OpenApiParameter(
                "ids",
                OpenApiTypes.STR,
                OpenApiParameter.QUERY,
                required=True,
                pattern=IDS_PATTERN,
                description=f"2 to {MAX_COMPARED} experiment ids, comma separated, in the "
                "order to show them.",
            )
        ],
        responses={200: ComparisonSerializer},
    )
    def get(self, request: Request) -> Response:
        ids = request.query_params.get("ids", "")
        if not re.fullmatch(IDS_PATTERN, ids):
            message = f"ids: 2 to {MAX_COMPARED} experiment ids, comma separated."
            raise ApplicationError("invalid_comparison", message)
        parsed = [uuid.UUID(part) for part in ids.split(",")]
        comparison = compare(self.scope(Experiment.objects.all()), parsed)
        first = comparison.figures[0].experiment
        return Response(
            {
                "dataset": str(first.dataset_version.dataset_id),
                "experiments": _figures(comparison.figures),
                "cases": [
                    {
                        "key": str(row.key),
                        "name": row.name,
                        "differs": row.differs,
                        "outcomes": [_outcome(o) for o in row.outcomes],
                    }
                    for row in comparison.cases
                ],
                "trend": _figures(comparison.trend),
            }
        )
