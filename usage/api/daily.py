"""Daily usage rows (per day, agent and model) over a date range: paginated JSON, or every row
of the range as CSV with ``Accept: text/csv`` (``?format=csv`` too)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import generics, serializers
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from audit.chain import jsonable
from audit.services import audit_record
from core.api.base import TenantScopedView
from core.api.pagination import check_page_params
from usage.api.renderers import CSVRenderer
from usage.api.serializers import UsageQuerySerializer
from usage.models import UsageDaily

COLUMNS = [
    "date",
    "site",
    "agent",
    "agent_name",
    "provider",
    "model",
    "purpose",
    "agent_runs",
    "llm_calls",
    "tool_calls",
    "tokens_input",
    "tokens_output",
    "tokens_cache_read",
    "tokens_cache_write",
    "cost_usd",
]


class UsageDailyQuerySerializer(UsageQuerySerializer):
    provider = serializers.CharField(required=False, max_length=32)
    model = serializers.CharField(required=False, max_length=100)


class UsageDailySerializer(serializers.ModelSerializer):
    agent_name = serializers.SerializerMethodField(
        help_text="The agent's name; null for usage without an agent or of a deleted agent."
    )

    class Meta:
        model = UsageDaily
        fields = ["id", *COLUMNS]
        read_only_fields = fields

    def get_agent_name(self, row: UsageDaily) -> str | None:
        # select_related: a deleted agent (no database constraint, history kept) joins as None.
        agent = row.agent if row.agent_id is not None else None
        return agent.name if agent is not None else None


CSV_EXAMPLE = (
    "date,site,agent,agent_name,provider,model,purpose,agent_runs,llm_calls,tool_calls,"
    "tokens_input,tokens_output,tokens_cache_read,tokens_cache_write,cost_usd\r\n"
    "2026-11-24,5e0c...,9a1b...,Lead qualifier,openai,gpt-4o-mini,run,12,30,18,42000,6100,0,0,"
    "0.009960\r\n"
)


class UsageDailyList(TenantScopedView, generics.ListAPIView):
    serializer_class = UsageDailySerializer
    renderer_classes = [JSONRenderer, CSVRenderer]
    ordering_fields = ["date", "cost_usd", "model", "agent_runs"]
    ordering = ["-date", "provider", "model"]
    csv_columns = COLUMNS
    query: dict[str, Any] | None = None  # the validated query, once get_queryset ran

    def get_queryset(self) -> Any:
        query = UsageDailyQuerySerializer(data=self.request.query_params.dict())
        query.is_valid(raise_exception=True)
        params = self.query = query.validated_data
        rows = UsageDaily.objects.select_related("agent").filter(
            date__gte=params["date_from"], date__lte=params["date_to"]
        )
        for name in ("agent", "site"):
            if params.get(name):
                rows = rows.filter(**{f"{name}_id": params[name]})
        for name in ("provider", "model"):
            if params.get(name):
                rows = rows.filter(**{name: params[name]})
        return self.scope(rows)

    def paginate_queryset(self, queryset: Any) -> Any:
        if self.request.accepted_renderer.format == "csv":
            check_page_params(self.request)
            return None  # the whole range (at most a year): a file, not a page
        return super().paginate_queryset(queryset)

    def finalize_response(
        self, request: Request, response: Any, *args: Any, **kwargs: Any
    ) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)
        if response.status_code >= 400 or request.method == "OPTIONS":
            # Errors keep the API's JSON error shape, and OPTIONS its description of the
            # endpoint, whatever the client accepts: neither is rows.
            response.accepted_renderer = JSONRenderer()
            response.accepted_media_type = "application/json"
        elif request.accepted_renderer.format == "csv" and self.query is not None:
            filename = f"usage-{self.query['date_from']}-to-{self.query['date_to']}.csv"
            response["Content-Disposition"] = f'attachment; filename="{filename}"'
        return response

    @extend_schema(
        operation_id="usage_daily_list",
        summary="Daily usage rows (JSON, or CSV with Accept: text/csv)",
        description="One row per day, agent, provider, model and purpose (`run`: the runs' own "
        "model calls, whose cost is their runs' cost; `memory_extraction`, `quality_judge`, "
        "`memory_merge`: model calls after runs; `evaluation`: experiments' runs), newest "
        "first. The range "
        "defaults to the last 30 days and spans at most 366. `Accept: text/csv` (or "
        "`?format=csv`) returns every row of the range as one CSV file instead of a page.",
        parameters=[UsageDailyQuerySerializer],
        responses={
            (200, "application/json"): UsageDailySerializer(many=True),
            (200, "text/csv"): OpenApiResponse(
                OpenApiTypes.STR,
                examples=[OpenApiExample("CSV", value=CSV_EXAMPLE, media_type="text/csv")],
            ),
        },
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        response = super().get(request, *args, **kwargs)
        if request.accepted_renderer.format == "csv" and self.query is not None:
            audit_record(  # a data export is in the audit log
                action="usage.exported",
                agency_id=self.principal.agency_id,
                object_type="usage.usagedaily",
                changes={"format": [None, "csv"], "filters": [None, jsonable(self.query)]},
            )
        return response
