"""Core endpoints: emit and read platform events; manage the agency's API keys."""

from __future__ import annotations

from typing import Any

import django_filters
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from core.api.base import TenantViewSet
from core.api.filtering import FilterSet
from core.api.permissions import ADMIN_ROLES
from core.api.serializers import (
    ApiKeyCreatedSerializer,
    ApiKeyCreateSerializer,
    ApiKeySerializer,
    EventEmitSerializer,
    EventSerializer,
)
from core.api_keys.services import api_key_create, api_key_revoke
from core.events import event_emit
from core.models import Event
from core.models.api_keys import ApiKey


class EventFilter(FilterSet):
    created_after = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="lt")
    event_type_prefix = django_filters.CharFilter(
        field_name="event_type", lookup_expr="startswith", max_length=200
    )

    class Meta:
        model = Event
        fields = ["event_type", "site", "actor_type"]


@extend_schema_view(
    list=extend_schema(operation_id="events_list", summary="The agency's event log"),
    retrieve=extend_schema(operation_id="events_retrieve", summary="One event"),
)
class EventViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantViewSet):
    serializer_class = EventSerializer
    filterset_class = EventFilter
    ordering_fields = ["created_at", "event_type"]
    ordering = ["-created_at"]

    def get_queryset(self) -> Any:
        return self.scope(Event.objects.all())

    @extend_schema(
        operation_id="events_emit",
        summary="Emit a platform event",
        description=(
            "Records the event in the agency's event log; agents subscribed to its type start "
            "once it is committed. With an `idempotency_key` already used, the first event is "
            "returned (200) and nothing starts again. `ai.*` types are reserved."
        ),
        request=EventEmitSerializer,
        responses={202: EventSerializer, 200: EventSerializer},
    )
    def create(self, request: Request) -> Response:
        body = EventEmitSerializer(data=request.data, context=self.get_serializer_context())
        body.is_valid(raise_exception=True)
        data = body.validated_data
        agency_id = self.principal.agency_id
        assert agency_id is not None  # RolePermission: writes always have an agency
        key = data["idempotency_key"]
        replay = (
            bool(key) and Event.objects.filter(agency_id=agency_id, idempotency_key=key).exists()
        )
        event = event_emit(
            agency_id=agency_id,
            event_type=data["event_type"],
            payload=data["payload"],
            site_id=data["site"].id if data["site"] else None,
            source_module="api",
            actor_type=self.principal.actor_type,
            actor_user_id=self.principal.user_id,
            actor_id=self.principal.actor_id,
            idempotency_key=key,
        )
        code = status.HTTP_200_OK if replay else status.HTTP_202_ACCEPTED
        return Response(EventSerializer(event).data, status=code)


class ApiKeyFilter(FilterSet):
    revoked = django_filters.BooleanFilter(
        field_name="revoked_at", lookup_expr="isnull", exclude=True
    )

    class Meta:
        model = ApiKey
        fields = ["role"]


@extend_schema_view(
    list=extend_schema(operation_id="api_keys_list", summary="The agency's API keys"),
    retrieve=extend_schema(operation_id="api_keys_retrieve", summary="One API key"),
)
class ApiKeyViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantViewSet):
    """Agency admins only, reads included: key names and prefixes are not for every member."""

    serializer_class = ApiKeySerializer
    filterset_class = ApiKeyFilter
    ordering_fields = ["created_at", "name", "last_used_at"]
    ordering = ["-created_at"]
    read_roles = ADMIN_ROLES
    write_roles = ADMIN_ROLES

    def get_queryset(self) -> Any:
        return self.scope(ApiKey.objects.all())

    @extend_schema(
        operation_id="api_keys_create",
        summary="Create an API key",
        description="The response carries the full key in `key`: it is shown this once only.",
        request=ApiKeyCreateSerializer,
        responses={201: ApiKeyCreatedSerializer},
    )
    def create(self, request: Request) -> Response:
        body = ApiKeyCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        agency_id = self.principal.agency_id
        assert agency_id is not None  # RolePermission: writes always have an agency
        key, full_key = api_key_create(
            agency_id=agency_id,
            name=body.validated_data["name"],
            role=body.validated_data["role"],
            created_by_id=self.principal.user_id,
            expires_at=body.validated_data["expires_at"],
        )
        data = ApiKeyCreatedSerializer(key, context={"key": full_key}).data
        return Response(data, status=status.HTTP_201_CREATED)

    @extend_schema(
        operation_id="api_keys_revoke",
        summary="Revoke an API key",
        description="Idempotent. A revoked key is refused (401) from the next request on.",
        request=None,
        responses={200: OpenApiResponse(ApiKeySerializer)},
    )
    @action(detail=True, methods=["post"])
    def revoke(self, request: Request, pk: str | None = None) -> Response:
        self.expect_no_body(request)
        key = api_key_revoke(api_key=self.get_object())
        return Response(ApiKeySerializer(key).data)
