"""Usage summary: what the agency's agents cost, per day, per agent and per model."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from core.api.base import TenantScopedView
from usage.api.serializers import UsageQuerySerializer, UsageSummarySerializer
from usage.models import UsageDaily
from usage.selectors import usage_summary


class UsageSummaryView(TenantScopedView):
    @extend_schema(
        operation_id="usage_summary",
        summary="Usage and cost totals for a date range",
        parameters=[UsageQuerySerializer],
        responses={200: UsageSummarySerializer},
    )
    def get(self, request: Request) -> Response:
        query = UsageQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        params = query.validated_data
        summary = usage_summary(
            rows=self.scope(UsageDaily.objects.all()),
            date_from=params["date_from"],
            date_to=params["date_to"],
            agent_id=params.get("agent"),
            site_id=params.get("site"),
        )
        return Response(UsageSummarySerializer(summary).data)
