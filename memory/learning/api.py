"""Learning over REST: a run's quality (read it, mark it good or bad) and an agent's learned
patterns (list, delete)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from agents.models import Agent, Execution
from core.api.base import TenantScopedView, parse_id
from core.api.fields import ErrorSerializer, StrictSerializer
from core.selectors import access_object
from memory.learning.models import HumanMark, LearnedPattern, RunQuality
from memory.learning.services import pattern_delete, quality_mark

EXECUTION_ID = OpenApiParameter("execution_id", OpenApiTypes.UUID, OpenApiParameter.PATH)
AGENT_ID = OpenApiParameter("agent_id", OpenApiTypes.UUID, OpenApiParameter.PATH)
PATTERN_ID = OpenApiParameter("pattern_id", OpenApiTypes.UUID, OpenApiParameter.PATH)


class RunQualitySerializer(serializers.ModelSerializer[RunQuality]):
    is_good = serializers.BooleanField(read_only=True)

    class Meta:
        model = RunQuality
        fields = [
            "execution", "score", "threshold", "is_good", "signals", "judge_score",
            "judge_verdict", "judge_reason", "human_mark", "human_note", "marked_at",
            "pattern", "scored_at",
        ]  # fmt: skip
        read_only_fields = fields


class QualityMarkSerializer(StrictSerializer):
    mark = serializers.ChoiceField(choices=[HumanMark.GOOD.value, HumanMark.BAD.value])
    note = serializers.CharField(required=False, allow_blank=True, max_length=2000, default="")


class LearnedPatternSerializer(serializers.ModelSerializer[LearnedPattern]):
    class Meta:
        model = LearnedPattern
        fields = [
            "id", "agent", "task_type", "description", "tool_sequence", "steps", "confidence",
            "success_count", "failure_count", "source_executions", "is_active", "last_used_at",
            "created_at", "updated_at",
        ]  # fmt: skip
        read_only_fields = fields


class ExecutionQuality(TenantScopedView):
    """``/executions/{id}/quality/``: the run's quality; POST marks it good or bad."""

    def execution(self) -> Execution:
        runs = self.scope(Execution.objects.all())
        return access_object(runs, agency=None, id=parse_id(self.kwargs["execution_id"]))

    @extend_schema(
        operation_id="executions_quality_retrieve",
        summary="The run's quality score",
        description="The score (0-1) from its signals, each signal's contribution, the model "
        "judge's verdict and a person's mark. 404 until the run is scored (right after it ends).",
        parameters=[EXECUTION_ID],
        responses={200: RunQualitySerializer, 404: OpenApiResponse(ErrorSerializer)},
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        execution = self.execution()
        row = self.scope(RunQuality.objects.filter(execution_id=execution.pk)).first()
        if row is None:
            raise Http404("The run is not scored yet.")
        return Response(RunQualitySerializer(row).data)

    @extend_schema(
        operation_id="executions_quality_mark",
        summary="Mark a finished run good or bad",
        description="The mark overrides the agent's quality threshold: a run marked good teaches "
        "its approach as a learned pattern (agents with `learning_enabled`) and raises the "
        "confidence of the patterns it was given; one marked bad lowers them. A run not scored "
        "yet is scored first. 400 for a run that has not ended.",
        parameters=[EXECUTION_ID],
        request=QualityMarkSerializer,
        responses={200: RunQualitySerializer, 400: OpenApiResponse(ErrorSerializer)},
    )
    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        execution = self.execution()
        body = QualityMarkSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        user = request.user if getattr(request.user, "is_authenticated", False) else None
        row = quality_mark(
            execution=execution,
            mark=body.validated_data["mark"],
            note=body.validated_data["note"],
            user=user,
        )
        return Response(RunQualitySerializer(row).data)


class _AgentPatterns(TenantScopedView):
    def agent(self) -> Agent:
        agents = self.scope(Agent.objects.all())
        return access_object(agents, agency=None, id=parse_id(self.kwargs["agent_id"]))


class AgentPatternList(_AgentPatterns, generics.ListAPIView):
    serializer_class = LearnedPatternSerializer

    def get_queryset(self) -> QuerySet[LearnedPattern]:
        if getattr(self, "swagger_fake_view", False):  # schema generation: no request
            return LearnedPattern.objects.none()
        return self.scope(LearnedPattern.objects.filter(agent=self.agent())).order_by(
            "-confidence", "-updated_at", "pk"
        )

    @extend_schema(
        operation_id="agents_patterns_list",
        summary="The agent's learned patterns",
        description="Approaches learned from its good runs (embeddings left out), the most "
        "trusted first.",
        parameters=[AGENT_ID],
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return self.list(request, *args, **kwargs)


class AgentPatternDetail(_AgentPatterns):
    @extend_schema(
        operation_id="agents_patterns_destroy",
        summary="Delete a learned pattern",
        parameters=[AGENT_ID, PATTERN_ID],
        request=None,
        responses={204: None, 404: OpenApiResponse(ErrorSerializer)},
    )
    def delete(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        patterns = self.scope(LearnedPattern.objects.filter(agent=self.agent()))
        pattern = access_object(patterns, agency=None, id=parse_id(self.kwargs["pattern_id"]))
        pattern_delete(pattern=pattern)
        return Response(status=status.HTTP_204_NO_CONTENT)
