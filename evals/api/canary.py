"""Canary versions over REST (README "Canary versions"): an agent's canary (its running one, or
its latest), started on a candidate version, stopped or promoted by hand. Same authentication,
roles and tenancy as the rest of the API (core/api/base.py)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from agents.models import Agent
from agents.services.versions import access_agent_version
from core.api.base import TenantScopedView, parse_id
from core.api.fields import ErrorSerializer, StrictSerializer
from core.exceptions import ApplicationError
from core.selectors import access_object
from evals.canary_figures import canary_figures
from evals.models import Canary, CanaryMetric, CanaryStatus
from evals.services.canaries import canary_promote, canary_start, canary_stop

AGENT_ID = OpenApiParameter("agent_id", OpenApiTypes.UUID, OpenApiParameter.PATH)


class CanarySerializer(serializers.ModelSerializer[Canary]):
    candidate_version = serializers.IntegerField(source="candidate.number")
    stable_version = serializers.IntegerField(source="stable.number")
    threshold = serializers.FloatField()
    figures = serializers.SerializerMethodField(
        help_text="Both arms' figures: live while it runs, as they were when it ended after."
    )

    class Meta:
        model = Canary
        fields = [
            "id", "agent", "status", "candidate_version", "stable_version", "share", "metric",
            "threshold", "min_runs", "promote_after", "created_at", "ended_at", "reason",
            "figures",
        ]  # fmt: skip
        read_only_fields = fields

    def get_figures(self, canary: Canary) -> dict[str, Any]:
        return canary_figures(canary) if canary.status == CanaryStatus.RUNNING else canary.figures


class CanaryStartSerializer(StrictSerializer):
    candidate = serializers.IntegerField(
        min_value=1, help_text="The candidate version's number (not the current version)."
    )
    share = serializers.IntegerField(
        required=False, default=10, help_text="Per cent of new runs on the candidate, 1 to 99."
    )
    metric = serializers.ChoiceField(
        choices=CanaryMetric.choices, required=False, default=CanaryMetric.FAILURE_RATE
    )
    threshold = serializers.DecimalField(
        max_digits=8, decimal_places=4, required=False, default=Decimal("0.05"),
        help_text="Failure rate: points above stable (0.05); cost or steps: fraction above (0.25).",
    )  # fmt: skip
    min_runs = serializers.IntegerField(
        required=False, default=20, help_text="Ended runs each arm needs before a rollback (>= 5)."
    )
    promote_after = serializers.IntegerField(
        required=False, allow_null=True, default=None,
        help_text="Promote after this many ended candidate runs with no rollback (null: by hand).",
    )  # fmt: skip


class _CanaryView(TenantScopedView):
    def agent(self) -> Agent:
        agents = self.scope(Agent.objects.all())
        return access_object(agents, agency=None, id=parse_id(self.kwargs["agent_id"]))

    def running(self) -> Canary:
        canary = Canary.objects.filter(agent=self.agent(), status=CanaryStatus.RUNNING).first()
        if canary is None:
            raise ApplicationError("no_canary", "This agent has no running canary.", status=409)
        return canary


class AgentCanaryView(_CanaryView):
    @extend_schema(
        operation_id="agents_canary_retrieve",
        summary="The agent's canary: its running one, else its latest",
        parameters=[AGENT_ID],
        responses={200: CanarySerializer, 404: ErrorSerializer},
    )
    def get(self, request: Request, agent_id: str) -> Response:
        canaries = Canary.objects.filter(agent=self.agent()).select_related("candidate", "stable")
        canary = (
            canaries.filter(status=CanaryStatus.RUNNING).first()
            or canaries.order_by("-created_at").first()
        )
        if canary is None:
            raise ApplicationError("no_canary", "This agent has had no canary.", status=404)
        return Response(CanarySerializer(canary).data)

    @extend_schema(
        operation_id="agents_canary_start",
        summary="Start a canary: a candidate version takes a share of the agent's new runs",
        description=(
            "New runs go to the candidate by a stable hash of their conversation (session, "
            "contact, the person who started them), else of the run; the rest stay on the "
            "current version. It rolls back by itself when worse on `metric` (README: the "
            "rule), and is promoted after `promote_after` candidate runs if set. 400 for a "
            "version that is current or a value out of range, 404 for an unknown version, 409 "
            "when the agent has a running canary."
        ),
        parameters=[AGENT_ID],
        request=CanaryStartSerializer,
        responses={
            201: CanarySerializer,
            400: ErrorSerializer,
            409: OpenApiResponse(ErrorSerializer, description="A canary runs already."),
        },
    )
    def post(self, request: Request, agent_id: str) -> Response:
        agent = self.agent()
        body = CanaryStartSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        candidate = access_agent_version(agent=agent, number=data.pop("candidate"))
        canary = canary_start(
            agent=agent, candidate=candidate, user_id=self.principal.user_id, **data
        )
        return Response(CanarySerializer(canary).data, status=status.HTTP_201_CREATED)


class CanaryStopView(_CanaryView):
    @extend_schema(
        operation_id="agents_canary_stop",
        summary="Stop the running canary: new runs go to the current version",
        parameters=[AGENT_ID],
        request=None,
        responses={200: CanarySerializer, 409: ErrorSerializer},
    )
    def post(self, request: Request, agent_id: str) -> Response:
        self.expect_no_body(request)
        canary = canary_stop(canary=self.running(), user_id=self.principal.user_id)
        return Response(CanarySerializer(canary).data)


class CanaryPromoteView(_CanaryView):
    @extend_schema(
        operation_id="agents_canary_promote",
        summary="Promote the running canary's candidate (as a restore of it does)",
        parameters=[AGENT_ID],
        request=None,
        responses={200: CanarySerializer, 409: ErrorSerializer},
    )
    def post(self, request: Request, agent_id: str) -> Response:
        self.expect_no_body(request)
        canary = canary_promote(canary=self.running(), user_id=self.principal.user_id)
        return Response(CanarySerializer(canary).data)
