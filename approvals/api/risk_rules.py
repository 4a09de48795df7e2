"""Risk rules: which tool calls need a person first. Members read the agency's rules and the
platform's; staff and admins write the agency's own, as in the admin. Platform rules are
read-only here: superusers change them in the admin (an API request acts inside one agency,
where row-level security lets no one write a platform row)."""

from __future__ import annotations

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

from approvals.models import RiskLevel, RiskRule
from approvals.risk_rules import (
    CONDITION_SCHEMA,
    risk_rule_create,
    risk_rule_delete,
    risk_rule_update,
)
from core.api.base import TenantViewSet
from core.api.fields import JSONObjectField, StrictSerializerMixin, documented
from core.api.filtering import FilterSet
from tools.api.fields import ToolPatternField


class RiskRuleSerializer(serializers.ModelSerializer):
    is_platform = serializers.SerializerMethodField(
        help_text="A platform rule (every agency's, read-only here)."
    )
    condition = JSONObjectField(read_only=True)

    class Meta:
        model = RiskRule
        fields = [
            "id",
            "name",
            "description",
            "tool_pattern",
            "condition",
            "risk_level",
            "requires_approval",
            "priority",
            "is_active",
            "is_platform",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.BooleanField())
    def get_is_platform(self, rule: RiskRule) -> bool:
        return rule.agency_id is None


ConditionField = documented(JSONObjectField, CONDITION_SCHEMA, "ConditionField")


class RiskRuleWriteSerializer(StrictSerializerMixin, serializers.ModelSerializer):
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(max_length=5000, required=False, allow_blank=True)
    tool_pattern = ToolPatternField(
        max_length=100, help_text="A tool-name pattern: 'email_send', 'crm_delete_*', '*'."
    )
    condition = ConditionField(
        required=False,
        max_bytes=4096,
        help_text='Narrows the rule to certain arguments, e.g. {"argument": "to", '
        '"min_items": 10}; tests: min_items, equals, contains, exists. {} matches every call.',
    )
    risk_level = serializers.ChoiceField(choices=RiskLevel.choices)

    class Meta:
        model = RiskRule
        fields = [
            "name",
            "description",
            "tool_pattern",
            "condition",
            "risk_level",
            "requires_approval",
            "priority",
            "is_active",
        ]
        validators: list[Any] = []  # a duplicate name is the service's field error
        extra_kwargs = {"priority": {"min_value": 0, "max_value": 32767}}


class RiskRuleFilter(FilterSet):
    is_platform = django_filters.BooleanFilter(field_name="agency", lookup_expr="isnull")

    class Meta:
        model = RiskRule
        fields = ["risk_level", "requires_approval", "is_active"]


RULE_EXAMPLE = {
    "name": "Bulk e-mail",
    "description": "Sending to ten or more people at once needs a person.",
    "tool_pattern": "email_*",
    "condition": {"argument": "to", "min_items": 10},
    "risk_level": "high",
    "requires_approval": True,
    "priority": 50,
}


@extend_schema_view(
    list=extend_schema(
        operation_id="risk_rules_list", summary="Risk rules (the agency's and the platform's)"
    ),
    retrieve=extend_schema(operation_id="risk_rules_retrieve", summary="One risk rule"),
    destroy=extend_schema(operation_id="risk_rules_destroy", summary="Delete an agency risk rule"),
)
class RiskRuleViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, TenantViewSet
):
    serializer_class = RiskRuleSerializer
    filterset_class = RiskRuleFilter
    ordering_fields = ["priority", "name", "risk_level", "created_at"]
    ordering = ["priority", "name"]
    http_method_names = ["get", "post", "patch", "delete"]

    def get_queryset(self) -> Any:
        rules = RiskRule.objects.all()
        agency_id = self.principal.agency_id
        if agency_id is not None:
            return rules.filter(Q(agency_id=agency_id) | Q(agency__isnull=True))
        return rules if self.principal.is_superuser else rules.none()

    @extend_schema(
        operation_id="risk_rules_create",
        summary="Add an agency risk rule",
        request=RiskRuleWriteSerializer,
        responses={201: RiskRuleSerializer},
        examples=[OpenApiExample("Bulk e-mail", value=RULE_EXAMPLE, request_only=True)],
    )
    def create(self, request: Request) -> Response:
        body = RiskRuleWriteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        assert self.principal.agency_id is not None  # RolePermission: writes have an agency
        rule = risk_rule_create(agency_id=self.principal.agency_id, **body.validated_data)
        return Response(RiskRuleSerializer(rule).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        operation_id="risk_rules_partial_update",
        summary="Change an agency risk rule",
        description="Platform rules are read-only here (403): superusers change them in the admin.",
        request=RiskRuleWriteSerializer,
        responses={200: RiskRuleSerializer},
        examples=[
            OpenApiExample("Raise the level", value={"risk_level": "critical"}, request_only=True)
        ],
    )
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        rule = self.get_object()
        body = RiskRuleWriteSerializer(rule, data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        rule = risk_rule_update(rule=rule, **body.validated_data)
        return Response(RiskRuleSerializer(rule).data)

    def perform_destroy(self, instance: RiskRule) -> None:
        risk_rule_delete(rule=instance)
