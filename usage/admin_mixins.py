"""What the usage pages of the admin add to a changelist: a CSV export of the rows the list shows
(its filters, search and date drill-down; every page, not just the current one), and the daily
usage charts of the staff home above the list. Both read the changelist's own queryset, so they
are scoped to the user's agency exactly as the list is.
"""

from __future__ import annotations

import csv
import datetime
import io
from typing import Any

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ALL_VAR, ERROR_FLAG, PAGE_VAR
from django.core.exceptions import PermissionDenied
from django.db.models import Max, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.urls import URLPattern, path, reverse
from django.utils import timezone

from audit.services import audit_record
from usage.charts import daily_series, usage_charts

# A cell that a spreadsheet would run as a formula (CSV injection): agent and model names are
# typed by agency staff.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# Query parameters of the list's page itself, not of which rows it shows.
_NOT_FILTERS = (PAGE_VAR, ALL_VAR, ERROR_FLAG)


def _cell(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    if isinstance(value, datetime.datetime):
        return timezone.localtime(value).isoformat()
    return "" if value is None else value


class CsvExportMixin(admin.ModelAdmin[Any]):
    """An "Export CSV" link above the changelist (``list_before_template``) that downloads the
    filtered rows. ``csv_columns``: (header, lookup) pairs read with ``values_list``, so that
    related names cost no query per row; superusers also get the agency column."""

    csv_columns: list[tuple[str, str]] = []
    list_before_template = "usage/admin/before_list.html"

    class Media:
        css = {"all": ["usage/admin.css"]}

    def get_urls(self) -> list[URLPattern]:
        opts = self.model._meta
        export = path(
            "export.csv",
            self.admin_site.admin_view(self.export_csv_view),
            name=f"{opts.app_label}_{opts.model_name}_export_csv",
        )
        return [export, *super().get_urls()]

    def get_csv_columns(self, request: HttpRequest) -> list[tuple[str, str]]:
        if request.user.is_superuser:
            return [("agency", "agency__slug"), *self.csv_columns]
        return list(self.csv_columns)

    def csv_filename(self) -> str:
        return f"{self.model._meta.model_name}-{timezone.localdate():%Y-%m-%d}.csv"

    def export_csv_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        try:
            changelist = self.get_changelist_instance(request)
        except IncorrectLookupParameters:
            return HttpResponseBadRequest("These filters do not apply to this list.")
        return self.csv_response(request, changelist.queryset)

    def csv_response(self, request: HttpRequest, queryset: QuerySet[Any]) -> HttpResponse:
        # Written whole, not streamed: the rows are read inside the request's tenant transaction,
        # which a streaming response would outlive.
        columns = self.get_csv_columns(request)
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow([header for header, _ in columns])
        rows = 0
        for row in queryset.values_list(*(lookup for _, lookup in columns)):
            writer.writerow([_cell(value) for value in row])
            rows += 1
        membership = getattr(request, "membership", None)
        audit_record(  # a data export is in the audit log (a superuser's: the platform's)
            action="usage.exported",
            agency_id=membership.agency_id if membership is not None else None,
            object_type=self.model._meta.label_lower,
            changes={"format": [None, "csv"], "filters": [None, request.GET.dict()],
                     "rows": [None, rows]},
        )  # fmt: skip
        response = HttpResponse(buffer.getvalue(), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{self.csv_filename()}"'
        return response

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        response = super().changelist_view(request, extra_context)
        context = getattr(response, "context_data", None)
        if context is not None and "cl" in context:
            opts = self.model._meta
            query = request.GET.copy()
            for name in _NOT_FILTERS:
                query.pop(name, None)
            url = reverse(f"admin:{opts.app_label}_{opts.model_name}_export_csv")
            context["csv_export_url"] = f"{url}?{query.urlencode()}" if query else url
            self.add_changelist_context(request, context)
        return response

    def add_changelist_context(self, request: HttpRequest, context: dict[str, Any]) -> None:
        """For subclasses: more of the list's context, its changelist (``cl``) built."""


class UsageChartsMixin(CsvExportMixin):
    """The staff home's charts of the last 14 days above the daily usage list, drawn from the
    rows the list's filters select. A list narrowed to dates (its date drill-down, a date filter)
    ends the charts at its last day with usage instead of today."""

    def add_changelist_context(self, request: HttpRequest, context: dict[str, Any]) -> None:
        super().add_changelist_context(request, context)
        rows = context["cl"].queryset
        end = None
        if any(name.startswith("date__") for name in request.GET):
            end = rows.aggregate(last=Max("date"))["last"]
        context["usage_charts"] = usage_charts(daily_series(rows=rows, end=end))
