"""The deploy gate over REST: an agent's gate (read, set, remove) and making one of its versions
current ("activate"), which a gated agent allows only for a version that passed its gate
(evals.services.gate). Same authentication, roles and tenancy as the rest of the API."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from agents.models import Agent
from agents.services.versions import access_agent_version
from core.api.base import TenantScopedView, parse_id
from core.api.fields import AgencyRelatedField, ErrorSerializer, StrictSerializer
from core.exceptions import ApplicationError
from core.selectors import access_object
from evals.models import Dataset, DeployGate
from evals.services.gate import deploy_gate_remove, deploy_gate_set, gate_version_activate

AGENT_ID = OpenApiParameter("agent_id", OpenApiTypes.UUID, OpenApiParameter.PATH)
VERSION_NUMBER = OpenApiParameter(
    "number", OpenApiTypes.INT, OpenApiParameter.PATH, description="The version's number: 1, 2, ..."
)


class DeployGateSerializer(serializers.ModelSerializer[DeployGate]):
    min_pass_rate = serializers.FloatField(help_text="The pass rate needed, 0 to 1.")

    class Meta:
        model = DeployGate
        fields = ["agent", "dataset", "min_pass_rate", "is_active", "updated_at"]
        read_only_fields = fields


class DeployGateWriteSerializer(StrictSerializer):
    dataset = AgencyRelatedField(
        queryset=Dataset.objects.all(), help_text="A dataset of this agent or of the agency."
    )
    # Checked by the service (0 to 1), so the answer names the field the same way everywhere.
    min_pass_rate = serializers.FloatField(help_text="The pass rate needed, 0 to 1 (0.9: 90 %).")
    is_active = serializers.BooleanField(required=False, default=True)


class ActivatedSerializer(serializers.Serializer[Any]):
    agent = serializers.UUIDField()
    current_version = serializers.IntegerField()


class _AgentView(TenantScopedView):
    def agent(self) -> Agent:
        agents = self.scope(Agent.objects.all())
        return access_object(agents, agency=None, id=parse_id(self.kwargs["agent_id"]))


class DeployGateView(_AgentView):
    @extend_schema(
        operation_id="agents_deploy_gate_retrieve",
        summary="The agent's deploy gate",
        parameters=[AGENT_ID],
        responses={200: DeployGateSerializer, 404: ErrorSerializer},
    )
    def get(self, request: Request, agent_id: str) -> Response:
        gate = DeployGate.objects.filter(agent=self.agent()).first()
        if gate is None:
            raise ApplicationError("no_gate", "This agent has no deploy gate.", status=404)
        return Response(DeployGateSerializer(gate).data)

    @extend_schema(
        operation_id="agents_deploy_gate_set",
        summary="Set the agent's deploy gate",
        description=(
            "With an active gate, a change of the agent's configuration (a save, a restore) "
            "is recorded as a version that is not current, and an experiment of the gate's "
            "dataset runs on it; the version becomes current when that experiment passes at "
            "least `min_pass_rate` of the cases. Refused naming the field for a dataset of another "
            "agent or without a case, or a rate outside 0 to 1 (422)."
        ),
        parameters=[AGENT_ID],
        request=DeployGateWriteSerializer,
        responses={200: DeployGateSerializer, 400: ErrorSerializer, 422: ErrorSerializer},
    )
    def put(self, request: Request, agent_id: str) -> Response:
        agent = self.agent()
        body = DeployGateWriteSerializer(data=request.data, context={"view": self})
        body.is_valid(raise_exception=True)
        gate = deploy_gate_set(agent=agent, **body.validated_data)
        return Response(DeployGateSerializer(gate).data)

    @extend_schema(
        operation_id="agents_deploy_gate_destroy",
        summary="Remove the agent's deploy gate (a saved change is current at once again)",
        parameters=[AGENT_ID],
        responses={204: None},
    )
    def delete(self, request: Request, agent_id: str) -> Response:
        deploy_gate_remove(agent=self.agent())
        return Response(status=status.HTTP_204_NO_CONTENT)


class VersionActivateView(_AgentView):
    @extend_schema(
        operation_id="agents_versions_activate",
        summary="Make a version the agent's current one",
        description=(
            "Puts the version's configuration on the agent (no new version); runs already "
            "started keep the version they started on. An agent with an active deploy gate "
            "takes only a version that passed it: its latest completed experiment of the "
            "gate's dataset reached the gate's pass rate. Otherwise 409 `gate_not_passed`, "
            "its message naming the failed cases (`extra.failed_cases`, `extra.experiment`), "
            'or saying "no passing gate experiment yet". 409 `already_current` for the '
            "current version."
        ),
        parameters=[AGENT_ID, VERSION_NUMBER],
        request=None,
        responses={
            200: ActivatedSerializer,
            409: OpenApiResponse(
                ErrorSerializer, description="Not passed the deploy gate, or current already."
            ),
        },
    )
    def post(self, request: Request, agent_id: str, number: str) -> Response:
        self.expect_no_body(request)
        agent = self.agent()
        version = access_agent_version(agent=agent, number=number)
        gate_version_activate(agent=agent, version=version, user_id=self.principal.user_id)
        return Response({"agent": agent.pk, "current_version": version.number})
