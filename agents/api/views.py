"""Agents: CRUD, manual execute, activate/deactivate, and their executions and versions
(read-only). Their memories: memory/api/."""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import generics, mixins, status
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from agents.api.filters import AgentFilter, ExecutionFilter
from agents.api.serializers.agents import AgentSerializer, AgentWriteSerializer
from agents.api.serializers.executions import (
    ExecuteAcceptedSerializer,
    ExecuteSerializer,
    ExecutionDetailSerializer,
    ExecutionSerializer,
)
from agents.api.serializers.versions import AgentVersionDetailSerializer, AgentVersionSerializer
from agents.inputs import input_error
from agents.models import Agent, AgentVersion, Execution, TriggerType
from agents.services import (
    agent_activate,
    agent_create,
    agent_deactivate,
    agent_delete,
    agent_update,
    execution_cancel,
    execution_create,
    skipped_trigger,
)
from agents.services.versions import access_agent_version, agent_versions
from core.api import idempotency
from core.api.base import TenantScopedView, TenantViewSet, parse_id
from core.api.exceptions import RULE, error_body
from core.api.fields import ErrorSerializer
from core.selectors import access_object

AGENT_ID = OpenApiParameter("agent_id", OpenApiTypes.UUID, OpenApiParameter.PATH)
VERSION_NUMBER = OpenApiParameter(
    "number", OpenApiTypes.INT, OpenApiParameter.PATH, description="The version's number: 1, 2, ..."
)


@extend_schema_view(
    list=extend_schema(operation_id="agents_list", summary="List agents"),
    retrieve=extend_schema(operation_id="agents_retrieve", summary="Get an agent"),
    destroy=extend_schema(
        operation_id="agents_destroy", summary="Delete an agent (emits ai.agent.deleted)"
    ),
)
class AgentViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, TenantViewSet
):
    serializer_class = AgentSerializer
    filterset_class = AgentFilter
    ordering_fields = ["name", "created_at", "updated_at", "last_run_at", "total_runs"]
    ordering = ["name"]
    http_method_names = ["get", "post", "patch", "delete"]

    def get_queryset(self) -> Any:
        return self.scope(Agent.objects.prefetch_related("goals"))

    def _agent(self, agent: Agent, *, code: int = status.HTTP_200_OK) -> Response:
        return Response(AgentSerializer(agent, context=self.get_serializer_context()).data, code)

    @extend_schema(
        operation_id="agents_create",
        summary="Create an agent (emits ai.agent.created)",
        request=AgentWriteSerializer,
        responses={201: AgentSerializer},
    )
    def create(self, request: Request) -> Response:
        body = AgentWriteSerializer(data=request.data, context=self.get_serializer_context())
        body.is_valid(raise_exception=True)
        assert self.principal.agency_id is not None  # RolePermission: writes have an agency
        agent = agent_create(
            agency_id=self.principal.agency_id,
            user_id=self.principal.user_id,
            **body.validated_data,
        )
        return self._agent(self.get_queryset().get(pk=agent.pk), code=status.HTTP_201_CREATED)

    @extend_schema(
        operation_id="agents_partial_update",
        summary="Change an agent (emits ai.agent.updated)",
        request=AgentWriteSerializer,
        responses={200: AgentSerializer},
    )
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        agent = self.get_object()
        body = AgentWriteSerializer(
            agent, data=request.data, partial=True, context=self.get_serializer_context()
        )
        body.is_valid(raise_exception=True)
        agent_update(agent=agent, user_id=self.principal.user_id, **body.validated_data)
        return self._agent(self.get_queryset().get(pk=agent.pk))

    def perform_destroy(self, instance: Agent) -> None:
        agent_delete(agent=instance, user_id=self.principal.user_id)

    @extend_schema(
        operation_id="agents_execute",
        summary="Start a run of the agent",
        description=(
            "Queues a manual run and answers at once with its id; follow it at "
            "`/executions/{id}/`. 409 when the agent is inactive or over its run limits (the "
            "skipped trigger is still logged). With an `Idempotency-Key` header, a retry of "
            "the same request returns the first answer instead of starting a second run."
        ),
        request=ExecuteSerializer,
        parameters=[idempotency.SCHEMA_PARAMETER],
        responses={
            202: ExecuteAcceptedSerializer,
            409: OpenApiResponse(ErrorSerializer, description="The run was not started."),
            422: OpenApiResponse(
                ErrorSerializer,
                description="The Idempotency-Key was already used for a different request.",
            ),
        },
    )
    @action(detail=True, methods=["post"])
    def execute(self, request: Request, pk: str | None = None) -> Response:
        agent = self.get_object()
        key = idempotency.idempotency_key_from(request.headers)
        body = ExecuteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        problem = input_error(agent.input_schema, body.validated_data["trigger_data"])
        if problem is not None:  # the agent's declared inputs (agents/inputs.py)
            raise ValidationError({"trigger_data": [problem]}, code=RULE)

        def start() -> tuple[int, Any]:
            execution = execution_create(
                agent=agent,
                trigger_type=TriggerType.MANUAL,
                input=body.validated_data["input"],
                trigger_data=body.validated_data["trigger_data"],
                triggered_by_id=self.principal.user_id,
            )
            if execution is None:
                # A response, not an exception: the skipped trigger's log row must be kept.
                log = skipped_trigger(agent)
                reason = log.skip_reason if log else "skipped"
                detail = log.skip_detail if log else "The run was not started."
                return status.HTTP_409_CONFLICT, error_body(reason, f"Not started: {detail}.")
            data = {"execution_id": execution.id, "status": execution.status}
            return status.HTTP_202_ACCEPTED, ExecuteAcceptedSerializer(data).data

        if key is None:
            code, data = start()
            return Response(data, status=code)
        assert self.principal.agency_id is not None  # RolePermission: writes have an agency
        code, data, replayed = idempotency.idempotent_call(
            agency_id=self.principal.agency_id,
            credential=idempotency.credential_of(self.principal),
            key=key,
            fingerprint=idempotency.request_hash(
                method="POST", path=f"agents/{agent.pk}/execute", body=body.validated_data
            ),
            call=start,
        )
        headers = {idempotency.REPLAYED_HEADER: "true"} if replayed else None
        return Response(data, status=code, headers=headers)

    @extend_schema(
        operation_id="agents_activate",
        summary="Activate the agent (emits ai.agent.activated)",
        request=None,
        responses={200: AgentSerializer},
    )
    @action(detail=True, methods=["post"])
    def activate(self, request: Request, pk: str | None = None) -> Response:
        self.expect_no_body(request)
        agent = agent_activate(agent=self.get_object(), user_id=self.principal.user_id)
        return self._agent(agent)

    @extend_schema(
        operation_id="agents_deactivate",
        summary="Deactivate the agent (emits ai.agent.deactivated)",
        request=None,
        responses={200: AgentSerializer},
    )
    @action(detail=True, methods=["post"])
    def deactivate(self, request: Request, pk: str | None = None) -> Response:
        self.expect_no_body(request)
        agent = agent_deactivate(agent=self.get_object(), user_id=self.principal.user_id)
        return self._agent(agent)


def with_version_number(executions: QuerySet[Execution]) -> QuerySet[Execution]:
    """Executions with the number of their version (``agent_version``), in the same query;
    not the version's configuration, which may be long."""
    return executions.select_related("agent_version").defer(
        "agent_version__config", "agent_version__change_summary"
    )


class _AgentChild(TenantScopedView):
    """One agent's rows; the agent is looked up like any by-id fetch (404 alike)."""

    def agent(self) -> Agent:
        agents = self.scope(Agent.objects.all())
        return access_object(agents, agency=None, id=parse_id(self.kwargs["agent_id"]))


class _AgentChildList(_AgentChild, generics.ListAPIView):
    """A list of one agent's rows."""


@extend_schema_view(
    get=extend_schema(
        operation_id="agents_executions_list",
        summary="The agent's execution history",
        description="Newest first by default; filter by status, trigger type or creation time.",
        parameters=[AGENT_ID],
    )
)
class AgentExecutionList(_AgentChildList):
    serializer_class = ExecutionSerializer
    filterset_class = ExecutionFilter
    ordering_fields = ["created_at", "completed_at", "cost_usd", "tokens_total"]
    ordering = ["-created_at"]

    def get_queryset(self) -> Any:
        if getattr(self, "swagger_fake_view", False):  # schema generation: no request
            return Execution.objects.none()
        return self.scope(with_version_number(Execution.objects.filter(agent=self.agent())))


@extend_schema_view(
    get=extend_schema(
        operation_id="agents_versions_list",
        summary="The agent's versions",
        description=(
            "Every save that changed the agent's configuration made a version; newest first. "
            "Read-only: a version is never changed, and a restore (in the admin) makes a new "
            "one. Each execution names the version it ran on (`agent_version`)."
        ),
        parameters=[AGENT_ID],
    )
)
class AgentVersionList(_AgentChildList):
    serializer_class = AgentVersionSerializer
    ordering_fields = ["number", "created_at"]
    ordering = ["-number"]
    current_version_id: uuid.UUID | None = None  # which one is the agent's now

    def get_queryset(self) -> Any:
        if getattr(self, "swagger_fake_view", False):  # schema generation: no request
            return AgentVersion.objects.none()
        agent = self.agent()
        self.current_version_id = agent.current_version_id
        return self.scope(agent_versions(agent=agent))

    def get_serializer_context(self) -> dict[str, Any]:
        return {**super().get_serializer_context(), "current_version_id": self.current_version_id}


@extend_schema_view(
    get=extend_schema(
        operation_id="agents_versions_retrieve",
        summary="One version of the agent, with its configuration",
        parameters=[AGENT_ID, VERSION_NUMBER],
    )
)
class AgentVersionDetail(_AgentChild, generics.RetrieveAPIView):
    serializer_class = AgentVersionDetailSerializer
    current_version_id: uuid.UUID | None = None

    def get_object(self) -> AgentVersion:
        agent = self.agent()
        self.current_version_id = agent.current_version_id
        return access_agent_version(agent=agent, number=self.kwargs["number"])

    def get_serializer_context(self) -> dict[str, Any]:
        return {**super().get_serializer_context(), "current_version_id": self.current_version_id}


@extend_schema_view(
    list=extend_schema(operation_id="executions_list", summary="The agency's executions"),
    retrieve=extend_schema(
        operation_id="executions_retrieve",
        summary="An execution with its steps (the trace)",
        responses={200: ExecutionDetailSerializer},
    ),
)
class ExecutionViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantViewSet):
    filterset_class = ExecutionFilter
    ordering_fields = ["created_at", "completed_at", "cost_usd", "tokens_total"]
    ordering = ["-created_at"]

    def get_queryset(self) -> Any:
        executions = with_version_number(Execution.objects.all())
        if self.action == "retrieve":
            executions = executions.prefetch_related("steps")
        return self.scope(executions)

    def get_serializer_class(self) -> Any:
        return ExecutionDetailSerializer if self.action == "retrieve" else ExecutionSerializer

    @extend_schema(
        operation_id="executions_cancel",
        summary="Cancel an execution",
        description=(
            "Idempotent. A waiting or pending run ends at once; a running one stops before its "
            "next model call or tool (`cancel_requested_at` is set meanwhile)."
        ),
        request=None,
        responses={200: ExecutionSerializer},
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        self.expect_no_body(request)
        execution = execution_cancel(execution=self.get_object())
        return Response(ExecutionSerializer(execution).data)
