"""Evaluations over REST: datasets (create, read, add a case, export and import JSONL), "save
as a test case" from a finished run, and experiments (start one, read its results). Same
authentication, roles and tenancy as the rest of the API (core/api/base.py)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from agents.models import Agent, Execution
from core.api.base import TenantScopedView, TenantViewSet, parse_id
from core.exceptions import ApplicationError
from core.selectors import access_object
from evals.api import serializers as s
from evals.models import Dataset, DatasetVersion, Experiment, TestCase
from evals.services.cases import case_save_from_execution
from evals.services.datasets import (
    dataset_case_add,
    dataset_create,
    dataset_import_jsonl,
    export_jsonl,
)
from evals.services.experiments import experiment_start


def _version(version: DatasetVersion) -> dict[str, Any]:
    return {
        "dataset": version.dataset_id,
        "version": version.number,
        "cases": version.cases.count(),
    }


@extend_schema_view(
    list=extend_schema(operation_id="datasets_list", summary="The agency's test datasets"),
    retrieve=extend_schema(operation_id="datasets_retrieve", summary="A dataset"),
)
class DatasetViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantViewSet):
    serializer_class = s.DatasetSerializer
    ordering = ["name"]

    def get_queryset(self) -> Any:
        return self.scope(Dataset.objects.select_related("current_version"))

    def _agency_id(self, agent: Agent | None) -> Any:
        agency_id = agent.agency_id if agent is not None else self.principal.agency_id
        if agency_id is None:
            raise ApplicationError("no_agency", "Name an agent: a superuser has no agency.")
        return agency_id

    @extend_schema(
        operation_id="datasets_create",
        summary="Create a dataset (of an agent, or of the agency)",
        request=s.DatasetCreateSerializer,
        responses={201: s.DatasetSerializer},
    )
    def create(self, request: Request) -> Response:
        body = s.DatasetCreateSerializer(data=request.data, context=self.get_serializer_context())
        body.is_valid(raise_exception=True)
        data = body.validated_data
        agent = data.get("agent")
        dataset = dataset_create(
            agency_id=self._agency_id(agent),
            name=data["name"],
            agent=agent,
            description=data.get("description", ""),
            user_id=self.principal.user_id,
        )
        return Response(s.DatasetSerializer(dataset).data, status.HTTP_201_CREATED)

    @extend_schema(
        operation_id="datasets_cases_list",
        summary="The cases of the dataset's current version",
        responses={200: s.CaseSerializer(many=True)},
    )
    @action(detail=True, methods=["get"], url_path="cases")
    def cases(self, request: Request, pk: str | None = None) -> Response:
        dataset = self.get_object()
        cases = TestCase.objects.filter(version_id=dataset.current_version_id).order_by("position")
        page = self.paginate_queryset(cases)
        return self.get_paginated_response(s.CaseSerializer(page, many=True).data)

    @extend_schema(
        operation_id="datasets_cases_create",
        summary="Add a case written by hand (makes a new version)",
        request=s.CaseWriteSerializer,
        responses={201: s.VersionSerializer},
    )
    @cases.mapping.post
    def add_case(self, request: Request, pk: str | None = None) -> Response:
        dataset = self.get_object()
        body = s.CaseWriteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        version = dataset_case_add(
            dataset=dataset,
            case=dict(body.validated_data),  # type: ignore[arg-type]
            user_id=self.principal.user_id,
        )
        return Response(_version(version), status.HTTP_201_CREATED)

    @extend_schema(
        operation_id="datasets_export",
        summary="The current version's cases as JSONL",
        responses={200: s.ExportSerializer},
    )
    @action(detail=True, methods=["get"], url_path="export")
    def export(self, request: Request, pk: str | None = None) -> Response:
        dataset = self.get_object()
        version = dataset.current_version
        assert version is not None  # (every dataset has version 1)
        return Response({"version": version.number, "jsonl": export_jsonl(version)})

    @extend_schema(
        operation_id="datasets_import",
        summary="Import JSONL cases (makes a new version; a bad line writes nothing)",
        request=s.ImportSerializer,
        responses={201: s.VersionSerializer},
    )
    @action(detail=True, methods=["post"], url_path="import")
    def import_jsonl(self, request: Request, pk: str | None = None) -> Response:
        dataset = self.get_object()
        body = s.ImportSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        version = dataset_import_jsonl(
            dataset=dataset, text=body.validated_data["jsonl"], user_id=self.principal.user_id
        )
        return Response(_version(version), status.HTTP_201_CREATED)


@extend_schema_view(
    post=extend_schema(
        operation_id="executions_save_as_test_case",
        summary="Save a finished run as a test case of a dataset (makes a new version)",
        request=s.SaveCaseSerializer,
        responses={201: s.VersionSerializer},
    )
)
class SaveAsTestCase(TenantScopedView):
    def post(self, request: Request, execution_id: str) -> Response:
        execution = access_object(
            self.scope(Execution.objects.all()), agency=None, id=parse_id(execution_id)
        )
        body = s.SaveCaseSerializer(data=request.data, context={"view": self})
        body.is_valid(raise_exception=True)
        dataset = body.validated_data["dataset"]
        version = case_save_from_execution(
            execution=execution,
            dataset=dataset,
            name=body.validated_data.get("name", ""),
            user_id=self.principal.user_id,
        )
        return Response(_version(version), status.HTTP_201_CREATED)


@extend_schema_view(
    list=extend_schema(operation_id="experiments_list", summary="The agency's experiments"),
    retrieve=extend_schema(
        operation_id="experiments_retrieve", summary="An experiment with each case's score"
    ),
)
class ExperimentViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantViewSet):
    serializer_class = s.ExperimentSerializer
    ordering = ["-created_at"]

    def get_queryset(self) -> Any:
        return self.scope(
            Experiment.objects.select_related("agent_version", "dataset_version").prefetch_related(
                "results__case"
            )
        )

    @extend_schema(
        operation_id="experiments_create",
        summary="Run a dataset against an agent version on the workers",
        request=s.ExperimentCreateSerializer,
        responses={201: s.ExperimentSerializer},
    )
    def create(self, request: Request) -> Response:
        body = s.ExperimentCreateSerializer(
            data=request.data, context=self.get_serializer_context()
        )
        body.is_valid(raise_exception=True)
        data = body.validated_data
        agent, dataset = data["agent"], data["dataset"]
        assert dataset.current_version is not None
        experiment = experiment_start(
            agent=agent,
            dataset_version=dataset.current_version,
            version_number=data.get("version"),
            user_id=self.principal.user_id,
        )
        return Response(
            s.ExperimentSerializer(self.get_queryset().get(pk=experiment.pk)).data,
            status.HTTP_201_CREATED,
        )
