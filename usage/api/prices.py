"""Model prices: what a model's tokens cost. Every member reads the platform's prices and the
agency's own (which override the platform's for the same model); agency admins keep the
agency's own, as in the admin. Platform prices are read-only here: superusers change them in the
admin (an API request acts inside one agency, where row-level security lets no one write a
platform row)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import django_filters
from django.db.models import Q
from drf_spectacular.utils import (
    OpenApiExample,
    extend_schema,
    extend_schema_field,
    extend_schema_view,
)
from rest_framework import mixins, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from agents.models import ProviderName
from core.api.base import TenantViewSet
from core.api.fields import StrictSerializerMixin
from core.api.filtering import FilterSet
from core.api.permissions import ADMIN_ROLES
from usage.models import ModelPrice
from usage.prices import model_price_create, model_price_delete, model_price_update

PRICE_FIELDS = [
    "provider",
    "model",
    "input_per_mtok",
    "output_per_mtok",
    "cache_read_per_mtok",
    "cache_write_per_mtok",
    "is_active",
]


class ModelPriceSerializer(serializers.ModelSerializer):
    is_platform = serializers.SerializerMethodField(
        help_text="A platform price (every agency's); an agency price of the same model "
        "overrides it."
    )

    class Meta:
        model = ModelPrice
        fields = ["id", *PRICE_FIELDS, "is_platform", "created_at", "updated_at"]
        read_only_fields = fields

    @extend_schema_field(serializers.BooleanField())
    def get_is_platform(self, price: ModelPrice) -> bool:
        return price.agency_id is None


def _price(*, required: bool = True) -> serializers.DecimalField:
    return serializers.DecimalField(
        max_digits=12,
        decimal_places=6,
        min_value=Decimal(0),
        required=required,
        allow_null=not required,
        help_text="USD per million tokens."
        if required
        else "USD per million tokens; null: the input price.",
    )


class ModelPriceWriteSerializer(StrictSerializerMixin, serializers.ModelSerializer):
    provider = serializers.ChoiceField(choices=ProviderName.choices)
    model = serializers.CharField(max_length=100)
    input_per_mtok = _price()
    output_per_mtok = _price()
    cache_read_per_mtok = _price(required=False)
    cache_write_per_mtok = _price(required=False)

    class Meta:
        model = ModelPrice
        fields = PRICE_FIELDS
        validators: list[Any] = []  # a duplicate model is the service's field error


class ModelPriceFilter(FilterSet):
    is_platform = django_filters.BooleanFilter(field_name="agency", lookup_expr="isnull")
    model = django_filters.CharFilter(max_length=100)

    class Meta:
        model = ModelPrice
        fields = ["provider", "model", "is_active"]


PRICE_EXAMPLE = {
    "provider": "openai",
    "model": "gpt-4o-mini",
    "input_per_mtok": "0.120000",
    "output_per_mtok": "0.480000",
    "cache_read_per_mtok": None,
    "cache_write_per_mtok": None,
    "is_active": True,
}


@extend_schema_view(
    list=extend_schema(
        operation_id="model_prices_list", summary="Model prices (platform and the agency's own)"
    ),
    retrieve=extend_schema(operation_id="model_prices_retrieve", summary="One model price"),
    destroy=extend_schema(
        operation_id="model_prices_destroy", summary="Delete an agency price (agency admins)"
    ),
)
class ModelPriceViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, TenantViewSet
):
    serializer_class = ModelPriceSerializer
    filterset_class = ModelPriceFilter
    ordering_fields = ["provider", "model", "input_per_mtok", "output_per_mtok"]
    ordering = ["provider", "model"]
    http_method_names = ["get", "post", "patch", "delete"]
    write_roles = ADMIN_ROLES

    def get_queryset(self) -> Any:
        prices = ModelPrice.objects.all()
        agency_id = self.principal.agency_id
        if agency_id is not None:
            return prices.filter(Q(agency_id=agency_id) | Q(agency__isnull=True))
        return prices if self.principal.is_superuser else prices.none()

    @extend_schema(
        operation_id="model_prices_create",
        summary="Add an agency price (agency admins)",
        description="A negotiated rate: it overrides the platform price of the same provider "
        "and model for this agency's runs.",
        request=ModelPriceWriteSerializer,
        responses={201: ModelPriceSerializer},
        examples=[OpenApiExample("Negotiated rate", value=PRICE_EXAMPLE, request_only=True)],
    )
    def create(self, request: Request) -> Response:
        body = ModelPriceWriteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        assert self.principal.agency_id is not None  # RolePermission: writes have an agency
        price = model_price_create(agency_id=self.principal.agency_id, **body.validated_data)
        return Response(ModelPriceSerializer(price).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        operation_id="model_prices_partial_update",
        summary="Change an agency price (agency admins)",
        description="Platform prices are read-only here (403): superusers change them in the "
        "admin.",
        request=ModelPriceWriteSerializer,
        responses={200: ModelPriceSerializer},
        examples=[
            OpenApiExample("New rate", value={"output_per_mtok": "0.400000"}, request_only=True)
        ],
    )
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        price = self.get_object()
        body = ModelPriceWriteSerializer(price, data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        price = model_price_update(price=price, **body.validated_data)
        return Response(ModelPriceSerializer(price).data)

    def perform_destroy(self, instance: ModelPrice) -> None:
        model_price_delete(price=instance)
