"""The agency's daily budget and its billing-period quotas.

Budgets: one row per day with its limit (USD) and what the runtime spent and reserved against
it; every member reads them, agency admins set limits (as in the admin). Quotas (usage periods:
runs and tokens included in a billing period, and the overage) are kept by the platform and are
read-only, as in the admin.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import django_filters
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from core.api.base import TenantViewSet
from core.api.fields import StrictSerializer
from core.api.filtering import FilterSet
from core.api.permissions import ADMIN_ROLES
from usage.budgets import budget_create, budget_delete, budget_set_limit
from usage.models import Budget, UsagePeriod, today


def _limit() -> serializers.DecimalField:
    return serializers.DecimalField(
        max_digits=12,
        decimal_places=4,
        min_value=Decimal(0),
        help_text="USD the agency's runs may spend that day; no run step starts past it.",
    )


class BudgetSerializer(serializers.ModelSerializer):
    remaining_usd = serializers.DecimalField(max_digits=14, decimal_places=6, read_only=True)

    class Meta:
        model = Budget
        fields = [
            "id",
            "date",
            "limit_usd",
            "used_usd",
            "reserved_usd",
            "remaining_usd",
            "invocations_count",
            "executions_started",
            "executions_completed",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


class BudgetCreateSerializer(StrictSerializer):
    date = serializers.DateField(required=False, help_text="Default: today.")
    limit_usd = _limit()


class BudgetUpdateSerializer(StrictSerializer):
    limit_usd = _limit()


class BudgetFilter(FilterSet):
    date_from = django_filters.DateFilter(field_name="date", lookup_expr="gte")
    date_to = django_filters.DateFilter(field_name="date", lookup_expr="lte")

    class Meta:
        model = Budget
        fields = ["date"]


BUDGET_RESPONSE = {
    "id": "0b6d8c8e-4f7a-4b5e-9a51-6f1d2c3b4a59",
    "date": "2026-11-25",
    "limit_usd": "20.0000",
    "used_usd": "3.412000",
    "reserved_usd": "0.050000",
    "remaining_usd": "16.538000",
    "invocations_count": 41,
    "executions_started": 40,
    "executions_completed": 38,
    "created_at": "2026-11-25T00:00:03Z",
    "updated_at": "2026-11-25T14:02:11Z",
}


@extend_schema_view(
    list=extend_schema(operation_id="budgets_list", summary="The agency's daily budgets"),
    retrieve=extend_schema(
        operation_id="budgets_retrieve",
        summary="One day's budget",
        examples=[OpenApiExample("Today", value=BUDGET_RESPONSE, response_only=True)],
    ),
    destroy=extend_schema(
        operation_id="budgets_destroy",
        summary="Delete a day's budget (agency admins)",
        description="With no budget row left, runs have no daily limit.",
    ),
)
class BudgetViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, TenantViewSet
):
    serializer_class = BudgetSerializer
    filterset_class = BudgetFilter
    ordering_fields = ["date", "limit_usd", "used_usd"]
    ordering = ["-date"]
    http_method_names = ["get", "post", "patch", "delete"]
    write_roles = ADMIN_ROLES

    def get_queryset(self) -> Any:
        return self.scope(Budget.objects.all())

    @extend_schema(
        operation_id="budgets_create",
        summary="Set a day's budget (agency admins)",
        description="The days after it start from the latest earlier limit, so this is also "
        "how the daily limit is set from now on. One row per day: a second one is a 400.",
        request=BudgetCreateSerializer,
        responses={201: BudgetSerializer},
        examples=[
            OpenApiExample("Twenty dollars a day", value={"limit_usd": "20.00"}, request_only=True),
            OpenApiExample("Created", value=BUDGET_RESPONSE, response_only=True),
        ],
    )
    def create(self, request: Request) -> Response:
        body = BudgetCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        assert self.principal.agency_id is not None  # RolePermission: writes have an agency
        budget = budget_create(
            agency_id=self.principal.agency_id,
            date=body.validated_data.get("date") or today(),
            limit_usd=body.validated_data["limit_usd"],
        )
        return Response(BudgetSerializer(budget).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        operation_id="budgets_partial_update",
        summary="Change a day's limit (agency admins)",
        description="Not below what is already spent or reserved that day (400).",
        request=BudgetUpdateSerializer,
        responses={200: BudgetSerializer},
        examples=[OpenApiExample("Raise", value={"limit_usd": "50.00"}, request_only=True)],
    )
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        budget = self.get_object()
        body = BudgetUpdateSerializer(data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        if "limit_usd" in body.validated_data:  # a PATCH without it changes nothing
            budget = budget_set_limit(budget=budget, limit_usd=body.validated_data["limit_usd"])
        return Response(BudgetSerializer(budget).data)

    def perform_destroy(self, instance: Budget) -> None:
        budget_delete(budget=instance)


class UsagePeriodSerializer(serializers.ModelSerializer):
    class Meta:
        model = UsagePeriod
        fields = [
            "id",
            "site",
            "period_start",
            "period_end",
            "total_agent_runs",
            "total_tokens_input",
            "total_tokens_output",
            "total_tool_calls",
            "total_approvals",
            "usage_by_provider",
            "estimated_cost",
            "included_runs",
            "included_tokens",
            "overage_runs",
            "overage_tokens",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


@extend_schema_view(
    list=extend_schema(
        operation_id="usage_periods_list",
        summary="Billing periods: usage against the included quota",
    ),
    retrieve=extend_schema(operation_id="usage_periods_retrieve", summary="One billing period"),
)
class UsagePeriodViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantViewSet):
    serializer_class = UsagePeriodSerializer
    filterset_fields = ["site"]
    ordering_fields = ["period_start", "estimated_cost"]
    ordering = ["-period_start"]

    def get_queryset(self) -> Any:
        return self.scope(UsagePeriod.objects.all())
