"""LLM providers: the agency's credentials and limits per provider (and site).

Every member reads them; agency admins write them, as in the admin (whoever changes a row's
endpoint decides where its stored key is sent). The API key is write-only: a response says
whether one is stored (``has_api_key``) and its last four characters (``api_key_hint``), never
the key.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from agents.models import LLMProvider, ProviderName
from agents.services.providers import (
    llm_provider_create,
    llm_provider_delete,
    llm_provider_update,
)
from core.api.base import TenantViewSet
from core.api.fields import AgencyRelatedField, StrictSerializerMixin, UrlField
from core.api.permissions import ADMIN_ROLES
from core.models import Site

READ_FIELDS = [
    "id",
    "provider_name",
    "site",
    "is_active",
    "is_default",
    "has_api_key",
    "api_key_hint",
    "api_endpoint",
    "organization_id",
    "available_models",
    "default_model",
    "requests_per_minute",
    "tokens_per_minute",
    "created_at",
    "updated_at",
]


class LLMProviderSerializer(serializers.ModelSerializer):
    has_api_key = serializers.BooleanField(read_only=True, help_text="Whether a key is stored.")
    api_key_hint = serializers.CharField(
        read_only=True,
        help_text="The stored key's last four characters (empty for short keys or none).",
    )
    api_endpoint = serializers.CharField(read_only=True)  # "" when unset: not a URI
    available_models = serializers.ListField(child=serializers.CharField(), read_only=True)

    class Meta:
        model = LLMProvider
        fields = READ_FIELDS
        read_only_fields = fields


class LLMProviderWriteSerializer(StrictSerializerMixin, serializers.ModelSerializer):
    site = AgencyRelatedField(
        queryset=Site.objects.all(),
        required=False,
        allow_null=True,
        help_text="One of the agency's sites, or null for every site.",
    )
    provider_name = serializers.ChoiceField(choices=ProviderName.choices)
    api_key = serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        max_length=1000,
        trim_whitespace=True,
        style={"input_type": "password"},
        help_text="Write-only: stored encrypted, never returned. Omitted or blank keeps the "
        "stored key.",
    )
    clear_api_key = serializers.BooleanField(
        write_only=True, required=False, default=False, help_text="Remove the stored key."
    )
    api_endpoint = UrlField(
        max_length=500,
        required=False,
        allow_blank=True,
        help_text="Base URL of an OpenAI-compatible server (required for local). Private "
        "addresses are refused unless the platform allows them.",
    )
    organization_id = serializers.CharField(max_length=200, required=False, allow_blank=True)
    available_models = serializers.ListField(
        child=serializers.CharField(max_length=100), max_length=200, required=False
    )
    default_model = serializers.CharField(max_length=100, required=False, allow_blank=True)

    class Meta:
        model = LLMProvider
        fields = [
            "provider_name",
            "site",
            "is_active",
            "is_default",
            "api_key",
            "clear_api_key",
            "api_endpoint",
            "organization_id",
            "available_models",
            "default_model",
            "requests_per_minute",
            "tokens_per_minute",
        ]
        # The unique rules are the service's field errors (one rule, one message).
        validators: list[Any] = []
        extra_kwargs = {
            "requests_per_minute": {"min_value": 0},
            "tokens_per_minute": {"min_value": 0},
        }


PROVIDER_EXAMPLE = {
    "provider_name": "openai",
    "site": None,
    "is_default": True,
    "api_key": "sk-proj-...",
    "default_model": "gpt-4o-mini",
    "available_models": ["gpt-4o-mini", "gpt-4o"],
    "requests_per_minute": 60,
}
PROVIDER_RESPONSE_EXAMPLE = {
    "id": "6f1c2b1e-3d0a-4c8e-9d4b-2a1f0e5c7b91",
    "provider_name": "openai",
    "site": None,
    "is_active": True,
    "is_default": True,
    "has_api_key": True,
    "api_key_hint": "Xy9Q",
    "api_endpoint": "",
    "organization_id": "",
    "available_models": ["gpt-4o-mini", "gpt-4o"],
    "default_model": "gpt-4o-mini",
    "requests_per_minute": 60,
    "tokens_per_minute": None,
    "created_at": "2026-11-25T10:00:00Z",
    "updated_at": "2026-11-25T10:00:00Z",
}


@extend_schema_view(
    list=extend_schema(operation_id="llm_providers_list", summary="The agency's LLM providers"),
    retrieve=extend_schema(
        operation_id="llm_providers_retrieve",
        summary="One LLM provider",
        examples=[OpenApiExample("Provider", value=PROVIDER_RESPONSE_EXAMPLE, response_only=True)],
    ),
    destroy=extend_schema(
        operation_id="llm_providers_destroy", summary="Delete an LLM provider (agency admins)"
    ),
)
class LLMProviderViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, TenantViewSet
):
    serializer_class = LLMProviderSerializer
    ordering_fields = ["provider_name", "created_at"]
    ordering = ["provider_name", "created_at"]
    filterset_fields = ["provider_name", "site", "is_active", "is_default"]
    http_method_names = ["get", "post", "patch", "delete"]
    write_roles = ADMIN_ROLES

    def get_queryset(self) -> Any:
        return self.scope(LLMProvider.objects.all())

    @extend_schema(
        operation_id="llm_providers_create",
        summary="Add an LLM provider (agency admins)",
        description="`api_key` is stored encrypted and never returned; the response says "
        "`has_api_key` and shows the key's last four characters.",
        request=LLMProviderWriteSerializer,
        responses={201: LLMProviderSerializer},
        examples=[
            OpenApiExample("OpenAI for every site", value=PROVIDER_EXAMPLE, request_only=True),
            OpenApiExample("Created", value=PROVIDER_RESPONSE_EXAMPLE, response_only=True),
        ],
    )
    def create(self, request: Request) -> Response:
        body = LLMProviderWriteSerializer(data=request.data, context=self.get_serializer_context())
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        data.pop("clear_api_key", None)
        assert self.principal.agency_id is not None  # RolePermission: writes have an agency
        provider = llm_provider_create(agency_id=self.principal.agency_id, **data)
        return Response(LLMProviderSerializer(provider).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        operation_id="llm_providers_partial_update",
        summary="Change an LLM provider (agency admins)",
        description="A new `api_key` replaces the stored one; `clear_api_key: true` removes "
        "it. Changing `api_endpoint` or `provider_name` while a key is stored requires the "
        "key again (or its removal): a stored key is never sent where it was not entered for.",
        request=LLMProviderWriteSerializer,
        responses={200: LLMProviderSerializer},
        examples=[
            OpenApiExample("Rotate the key", value={"api_key": "sk-proj-new..."}, request_only=True)
        ],
    )
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        provider = self.get_object()
        body = LLMProviderWriteSerializer(
            provider, data=request.data, partial=True, context=self.get_serializer_context()
        )
        body.is_valid(raise_exception=True)
        provider = llm_provider_update(provider=provider, **body.validated_data)
        return Response(LLMProviderSerializer(provider).data)

    def perform_destroy(self, instance: LLMProvider) -> None:
        llm_provider_delete(provider=instance)
