"""Datasets over REST (README "Datasets"): upload a file (multipart), register a CRM query, read
a schema, edit descriptions, delete; download a tool call's table result as CSV. Same
authentication, roles and tenancy as the rest of the API (core/api/base.py): every member reads,
staff and admins write."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from core.api.base import TenantScopedView, TenantViewSet, parse_id
from core.exceptions import ApplicationError
from core.selectors import access_object
from datasets import services
from datasets.api import serializers as s
from datasets.models import Dataset, DatasetResult
from datasets.selectors import LIST_FIELDS


def _agency(view: TenantScopedView) -> Any:
    from core.models import Agency  # noqa: PLC0415 - only writes need the row

    if view.principal.agency_id is None:
        raise ApplicationError("no_agency", "A superuser writes datasets as a member of an agency.")
    return Agency.objects.get(pk=view.principal.agency_id)


def _user(view: TenantScopedView) -> Any:
    from core.models import User  # noqa: PLC0415

    user_id = view.principal.user_id
    return User.objects.filter(pk=user_id).first() if user_id is not None else None


@extend_schema_view(
    list=extend_schema(operation_id="analysis_datasets_list", summary="The agency's datasets"),
    retrieve=extend_schema(
        operation_id="analysis_datasets_retrieve", summary="A dataset and its schema"
    ),
    destroy=extend_schema(
        operation_id="analysis_datasets_destroy", summary="Delete a dataset and its data"
    ),
)
class AnalysisDatasetViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, TenantViewSet
):
    serializer_class = s.AnalysisDatasetSerializer
    ordering = ["name"]

    def get_parsers(self) -> list[Any]:
        # An upload is multipart (the file); every other action takes JSON, as the whole API.
        method = (getattr(self.request, "method", "") or "").lower()
        if getattr(self, "action_map", {}).get(method) == "create":
            return [MultiPartParser()]
        return super().get_parsers()

    def get_queryset(self) -> Any:
        return self.scope(Dataset.objects.only(*LIST_FIELDS))

    @extend_schema(
        operation_id="analysis_datasets_create",
        summary="Upload a CSV, XLSX or Parquet file as a dataset",
        description="multipart/form-data. The schema (column names, types, sample values, row "
        "count) is inferred on upload; a file that cannot be read, is empty, or is past "
        "AGENTDESK_DATASET_MAX_UPLOAD_BYTES / _MAX_ROWS is a 400 naming why, and nothing is kept.",
        request={"multipart/form-data": s.UploadSerializer},
        responses={201: s.AnalysisDatasetSerializer},
    )
    def create(self, request: Request) -> Response:
        body = s.UploadSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        upload = data["file"]
        dataset = services.dataset_upload(
            agency=_agency(self),
            name=data["name"],
            file_name=upload.name or "",
            content=upload.read(),
            file_format=data.get("format", ""),
            title=data.get("title", ""),
            description=data.get("description", ""),
            created_by=_user(self),
        )
        return Response(s.AnalysisDatasetSerializer(dataset).data, status.HTTP_201_CREATED)

    @extend_schema(
        operation_id="analysis_datasets_crm_query",
        summary="Register a query over CRM entities as a dataset",
        request=s.CrmQuerySerializer,
        responses={201: s.AnalysisDatasetSerializer},
    )
    @action(detail=False, methods=["post"], url_path="crm-query")
    def crm_query(self, request: Request) -> Response:
        body = s.CrmQuerySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        dataset = services.dataset_register_query(
            agency=_agency(self),
            name=data["name"],
            query=s.as_data_query(data["query"]),
            title=data.get("title", ""),
            description=data.get("description", ""),
            created_by=_user(self),
        )
        return Response(s.AnalysisDatasetSerializer(dataset).data, status.HTTP_201_CREATED)

    @extend_schema(
        operation_id="analysis_datasets_partial_update",
        summary="Edit a dataset's title, description and columns' descriptions",
        request=s.DatasetUpdateSerializer,
        responses={200: s.AnalysisDatasetSerializer},
    )
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        dataset = self.get_object()
        body = s.DatasetUpdateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        dataset = services.dataset_update(
            dataset=dataset,
            title=data.get("title"),
            description=data.get("description"),
            column_descriptions=(
                {c["name"]: c["description"] for c in data["columns"]}
                if "columns" in data
                else None
            ),
        )
        return Response(s.AnalysisDatasetSerializer(dataset).data)

    def perform_destroy(self, instance: Dataset) -> None:
        services.dataset_delete(dataset=instance)


class ResultDownload(TenantScopedView):
    """A table result of execute_sql / execute_query_plan, whole, as CSV."""

    @extend_schema(
        operation_id="analysis_results_download",
        summary="Download a tool call's table result as CSV",
        responses={(200, "text/csv"): OpenApiResponse(OpenApiTypes.STR)},
    )
    def get(self, request: Request, result_id: str) -> HttpResponse:
        result = access_object(
            self.scope(DatasetResult.objects.all()), agency=None, id=parse_id(result_id)
        )
        response = HttpResponse(bytes(result.csv), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = (
            f'attachment; filename="{result.tool_name}-{str(result.id)[:8]}.csv"'
        )
        return response


class ResultDetail(TenantScopedView):
    @extend_schema(
        operation_id="analysis_results_retrieve",
        summary="A tool call's table result (without its rows)",
        responses={200: s.TableResultSerializer},
    )
    def get(self, request: Request, result_id: str) -> Response:
        result = access_object(
            self.scope(DatasetResult.objects.defer("csv")), agency=None, id=parse_id(result_id)
        )
        return Response(s.TableResultSerializer(result).data, status=status.HTTP_200_OK)
