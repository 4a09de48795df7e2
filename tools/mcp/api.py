"""REST endpoints of MCP servers: ``/api/v1/mcp-servers/`` (list, create, get, change, delete)
and ``/api/v1/mcp-servers/{id}/refresh`` (discover its tools now). Headers are write-only:
answers name the headers set (``header_names``), never their values. Members read; agency
admins and staff write."""

from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from core.api.base import TenantViewSet
from core.api.exceptions import error_body
from core.api.fields import ErrorSerializer, StrictSerializerMixin, UrlField, documented
from tools.mcp.models import MAX_TIMEOUT_SECONDS, SLUG_MAX_LENGTH, SLUG_REGEX, McpServer
from tools.mcp.services.checks import HEADERS_SCHEMA
from tools.mcp.services.discovery import mcp_server_refresh
from tools.mcp.services.servers import mcp_server_create, mcp_server_delete, mcp_server_update


class McpServerSerializer(serializers.ModelSerializer):
    has_headers = serializers.BooleanField(read_only=True)
    tools = serializers.SerializerMethodField()

    class Meta:
        model = McpServer
        fields = [
            "id", "agency", "name", "slug", "url", "is_enabled", "timeout_seconds",
            "require_approval", "rate_limit_per_minute", "rate_limit_per_hour", "has_headers",
            "header_names", "tools", "last_refreshed_at", "last_error", "created_at",
            "updated_at",
        ]  # fmt: skip
        read_only_fields = fields

    def get_tools(self, obj: McpServer) -> list[str]:
        """The registry names of its tools."""
        return sorted(t.name for t in obj.tools.all())


HeadersField = documented(serializers.DictField, HEADERS_SCHEMA, "HeadersField")


class McpServerWriteSerializer(StrictSerializerMixin, serializers.ModelSerializer):
    slug = serializers.CharField(
        max_length=SLUG_MAX_LENGTH,
        validators=[RegexValidator(SLUG_REGEX, "Lower-case letters and digits, single "
                                   "underscores between them, starting with a letter.")],
        help_text="The prefix of its tools' names (mcp_[slug]__[tool]); unique on the platform.",
    )  # fmt: skip
    url = UrlField(max_length=500)
    headers = HeadersField(
        child=serializers.CharField(max_length=4000, trim_whitespace=False, allow_blank=True),
        required=False,
        write_only=True,
        help_text="Write-only HTTP headers sent to the server (e.g. Authorization), stored "
        "encrypted. Omit to keep the stored ones; {} removes them.",
    )
    timeout_seconds = serializers.IntegerField(
        min_value=1, max_value=MAX_TIMEOUT_SECONDS, required=False
    )

    class Meta:
        model = McpServer
        fields = [
            "name", "slug", "url", "headers", "is_enabled", "timeout_seconds",
            "require_approval", "rate_limit_per_minute", "rate_limit_per_hour",
        ]  # fmt: skip
        validators: list[object] = []  # a taken slug is the service's field error
        extra_kwargs = {
            "rate_limit_per_minute": {"min_value": 1},
            "rate_limit_per_hour": {"min_value": 1},
        }


class RefreshSerializer(serializers.Serializer):
    server = McpServerSerializer()
    added = serializers.ListField(child=serializers.CharField())
    updated = serializers.ListField(child=serializers.CharField())
    removed = serializers.ListField(child=serializers.CharField())
    skipped = serializers.ListField(child=serializers.CharField())


_EXAMPLE = OpenApiExample(
    "Register a server",
    request_only=True,
    value={
        "name": "Weather",
        "slug": "weather",
        "url": "https://mcp.example.com/mcp",
        "headers": {"Authorization": "Bearer <token>"},
    },
)


@extend_schema_view(
    list=extend_schema(operation_id="mcp_servers_list", summary="The agency's MCP servers"),
    retrieve=extend_schema(operation_id="mcp_servers_retrieve", summary="Get an MCP server"),
    destroy=extend_schema(
        operation_id="mcp_servers_destroy", summary="Delete an MCP server and its tools"
    ),
)
class McpServerViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, TenantViewSet
):
    serializer_class = McpServerSerializer
    ordering_fields = ["name", "created_at"]
    ordering = ["name"]
    http_method_names = ["get", "post", "patch", "delete"]

    def get_queryset(self) -> Any:
        return self.scope(McpServer.objects.prefetch_related("tools"))

    @extend_schema(
        operation_id="mcp_servers_create",
        summary="Register an MCP server",
        description="Registers the server; POST .../refresh then discovers its tools.",
        request=McpServerWriteSerializer,
        responses={201: McpServerSerializer},
        examples=[_EXAMPLE],
    )
    def create(self, request: Request) -> Response:
        body = McpServerWriteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        assert self.principal.agency_id is not None  # RolePermission: writes have an agency
        server = mcp_server_create(agency_id=self.principal.agency_id, **body.validated_data)
        return Response(McpServerSerializer(server).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        operation_id="mcp_servers_partial_update",
        summary="Change an MCP server",
        request=McpServerWriteSerializer,
        responses={200: McpServerSerializer},
    )
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        server = self.get_object()
        body = McpServerWriteSerializer(server, data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        server = mcp_server_update(server=server, **body.validated_data)
        return Response(McpServerSerializer(server).data)

    def perform_destroy(self, instance: McpServer) -> None:
        mcp_server_delete(server=instance)

    @extend_schema(
        operation_id="mcp_servers_refresh",
        summary="Discover the server's tools now",
        description="Lists the server's tools and stores them: new ones added, changed ones "
        "updated, those it no longer lists removed. If the server cannot be reached (or its "
        "address is refused), a 502 says why and the stored tools stay as they were; if its "
        "stored headers cannot be decrypted (the keys changed), a 400 says to enter them again.",
        request=None,
        responses={
            200: RefreshSerializer,
            400: OpenApiResponse(
                ErrorSerializer, description="Its stored headers cannot be decrypted."
            ),
            502: OpenApiResponse(ErrorSerializer, description="The server could not be listed."),
        },
    )
    @action(detail=True, methods=["post"])
    def refresh(self, request: Request, pk: str | None = None) -> Response:
        self.expect_no_body(request)
        server = self.get_object()
        result = mcp_server_refresh(server=server)
        if result.error_code == "mcp_configuration_error":  # ours to fix, not the server's
            body = error_body(result.error_code, result.error_message, {})
            return Response(body, status=status.HTTP_400_BAD_REQUEST)
        if not result.ok:
            body = error_body(
                "mcp_unavailable", result.error_message, {"reason": result.error_code}
            )
            return Response(body, status=status.HTTP_502_BAD_GATEWAY)
        return Response(
            {
                "server": McpServerSerializer(server).data,
                "added": result.added,
                "updated": result.updated,
                "removed": result.removed,
                "skipped": result.skipped,
            }
        )
