"""The tool registry: members read the system tools and their agency's own; superusers (acting
for an agency with ``?agency=``) create and change agency tools, as in the admin."""

from __future__ import annotations

from typing import Any

from django.db.models import Q
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status
from rest_framework.permissions import SAFE_METHODS
from rest_framework.request import Request
from rest_framework.response import Response

from core.api.base import TenantViewSet
from core.api.filtering import FilterSet
from tools.api.serializers import ToolSerializer, ToolWriteSerializer
from tools.models import Tool
from tools.services import tool_create, tool_delete, tool_update


class ToolFilter(FilterSet):
    class Meta:
        model = Tool
        fields = ["category", "handler_type", "is_dangerous", "is_system", "is_active"]


@extend_schema_view(
    list=extend_schema(operation_id="tools_list", summary="Tools available to the agency"),
    retrieve=extend_schema(operation_id="tools_retrieve", summary="Get a tool"),
    destroy=extend_schema(operation_id="tools_destroy", summary="Delete an agency tool"),
)
class ToolViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, TenantViewSet
):
    serializer_class = ToolSerializer
    filterset_class = ToolFilter
    ordering_fields = ["name", "category", "created_at"]
    ordering = ["category", "name"]
    http_method_names = ["get", "post", "patch", "delete"]
    write_roles: frozenset[str] = frozenset()  # superusers only

    def get_queryset(self) -> Any:
        tools = Tool.objects.all()
        agency_id = self.principal.agency_id
        if self.request.method not in SAFE_METHODS:
            # Writes: only the agency's own tools (RolePermission: writes have an agency).
            return tools.filter(agency_id=agency_id, is_system=False) if agency_id else tools.none()
        if agency_id is not None:
            return tools.filter(Q(agency_id=agency_id) | Q(agency__isnull=True))
        return tools if self.principal.is_superuser else tools.none()

    @extend_schema(
        operation_id="tools_create",
        summary="Create an agency tool (superusers)",
        request=ToolWriteSerializer,
        responses={201: ToolSerializer},
    )
    def create(self, request: Request) -> Response:
        body = ToolWriteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        assert self.principal.agency_id is not None  # RolePermission: writes have an agency
        tool = tool_create(agency_id=self.principal.agency_id, **body.validated_data)
        return Response(ToolSerializer(tool).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        operation_id="tools_partial_update",
        summary="Change an agency tool (superusers)",
        request=ToolWriteSerializer,
        responses={200: ToolSerializer},
    )
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        tool = self.get_object()
        body = ToolWriteSerializer(tool, data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        tool = tool_update(tool=tool, **body.validated_data)
        return Response(ToolSerializer(tool).data)

    def perform_destroy(self, instance: Tool) -> None:
        tool_delete(tool=instance)
