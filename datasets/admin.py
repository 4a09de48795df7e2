"""Datasets in the admin: staff upload a CSV, XLSX or Parquet file (the add page), read its
inferred schema and describe its columns (the change page: one line per column, "name:
description"); table results of the SQL tools are read-only rows with a CSV download, and each
run's results show on its run page (a panel the agents admin shows, agents/admin/panels.py)."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from unfold.decorators import action
from unfold.widgets import UnfoldAdminFileFieldWidget, UnfoldAdminTextareaWidget

from agents.admin import panels
from agents.admin.common import EMPTY
from agents.models import Execution
from core.admin_empty import EmptyState
from core.admin_scoping import AgencyScopedAdmin, ReadOnlyAdminMixin
from core.exceptions import ApplicationError
from datasets import chart_admin, crm_admin, ingest, selectors, services
from datasets.models import Dataset, DatasetResult

_ = chart_admin  # the run page's Charts panel and its images' URL register on import

CELL = "text-align: left; vertical-align: top; padding: 2px 12px 2px 0; overflow-wrap: anywhere"
PREVIEW_ROWS = 5


class DatasetForm(forms.ModelForm[Dataset]):
    file = forms.FileField(
        required=False,
        widget=UnfoldAdminFileFieldWidget,
        help_text="CSV, XLSX (its first sheet) or Parquet.",
    )
    column_descriptions = forms.CharField(
        required=False,
        widget=UnfoldAdminTextareaWidget(attrs={"rows": 6}),
        help_text="One line per column, 'column: what it holds' (units, codes, what a value "
        "means): the model reads them to map a request's words to columns.",
    )

    class Meta:
        model = Dataset
        fields = ["name", "title", "description"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ingested: ingest.Ingested | None = None
        self.file_format = ""
        if not self.instance._state.adding and "name" in self.fields:  # (a viewer's has none)
            self.fields["name"].disabled = True  # the SQL table name agents already use
            self.fields["column_descriptions"].initial = "\n".join(
                f"{c['name']}: {c['description']}" for c in self.instance.columns
            )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        upload = data.get("file")
        if self.instance._state.adding:
            if upload is None:
                raise ValidationError({"file": "Choose a CSV, XLSX or Parquet file."})
            try:
                self.file_format = ingest.format_of(upload.name or "")
                self.ingested = ingest.ingest(upload.read(), self.file_format)
            except ApplicationError as error:
                raise ValidationError({"file": error.message}) from error
        return data

    def descriptions(self) -> dict[str, str] | None:
        if self.instance._state.adding:
            return None
        names = {c["name"] for c in self.instance.columns}
        found: dict[str, str] = {}
        for line in str(self.cleaned_data.get("column_descriptions") or "").splitlines():
            name, _, text = line.partition(":")
            if name.strip() in names:
                found[name.strip()] = text.strip()
        return found


@admin.register(Dataset)
class DatasetAdmin(AgencyScopedAdmin):
    form = DatasetForm
    empty_state = EmptyState(
        "No dataset yet",
        "Upload a CSV, XLSX or Parquet file: its columns, types and sample values are read on "
        "upload, and agents with the analysis tools query it as datasets.<name>.",
    )
    list_display = ["name", "title", "source", "file_format", "row_count", "size_bytes"]
    search_fields = ["name", "title", "description"]
    readonly_fields = ["source", "file_format", "original_name", "size_bytes", "row_count",
                       "crm_query", "schema"]  # fmt: skip
    actions_list = ["register_crm_query"]

    def get_queryset(self, request: HttpRequest) -> Any:
        return super().get_queryset(request).defer("data")

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            if _crm_query_add(request):
                return crm_admin.CRM_FIELDS
            return ["name", "title", "description", "file"]
        return ["name", "title", "description", "column_descriptions", *self.readonly_fields]

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> Any:
        if obj is None and _crm_query_add(request):
            kwargs["form"] = crm_admin.CrmQueryDatasetForm
        return super().get_form(request, obj, change, **kwargs)

    @action(description="Register a CRM query", icon="filter_alt", permissions=["add"])
    def register_crm_query(self, request: HttpRequest) -> HttpResponse:
        add = reverse("admin:datasets_dataset_add")
        return HttpResponseRedirect(f"{add}?{crm_admin.SOURCE_PARAMETER}=crm_query")

    @admin.display(description="CRM query")
    def crm_query(self, obj: Dataset) -> SafeString | str:
        if not obj.query:
            return EMPTY
        return format_html("<code>{}</code>", json.dumps(obj.query, sort_keys=True))

    @admin.display(description="schema")
    def schema(self, obj: Dataset) -> SafeString | str:
        if not obj.columns:
            return EMPTY
        rows = format_html_join(
            "",
            f'<tr><td style="{CELL}">{{}}</td><td style="{CELL}">{{}}</td>'
            f'<td style="{CELL}">{{}}</td><td style="{CELL}">{{}}</td></tr>',
            (
                (c["name"], c["type"], ", ".join(c["samples"]), c["description"])
                for c in obj.columns
            ),
        )
        head = "".join(
            f'<th style="{CELL}">{n}</th>' for n in ("Column", "Type", "Samples", "Description")
        )
        return format_html(
            '<table class="dataset-schema"><thead><tr>{}</tr></thead><tbody>{}</tbody></table>',
            SafeString(head),
            rows,
        )

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if isinstance(form, crm_admin.CrmQueryDatasetForm):
            services.dataset_register_query(
                agency=obj.agency,
                name=obj.name,
                query=form.query,
                title=obj.title,
                description=obj.description,
                created_by=request.user if request.user.is_authenticated else None,
                instance=obj,
            )
            return
        if change:
            services.dataset_update(
                dataset=obj,
                title=obj.title,
                description=obj.description,
                column_descriptions=form.descriptions(),
            )
            return
        services.dataset_upload(
            agency=obj.agency,
            name=obj.name,
            file_name=form.cleaned_data["file"].name or "",
            content=b"",
            file_format=form.file_format,
            title=obj.title,
            description=obj.description,
            created_by=request.user if request.user.is_authenticated else None,
            ingested=form.ingested,
            instance=obj,
        )


def _crm_query_add(request: HttpRequest) -> bool:
    return request.GET.get(crm_admin.SOURCE_PARAMETER) == "crm_query"


def _download_url(result: DatasetResult) -> str:
    return reverse("admin:datasets_datasetresult_download", args=[result.pk])


@admin.register(DatasetResult)
class DatasetResultAdmin(ReadOnlyAdminMixin, AgencyScopedAdmin):
    list_display = ["created_at", "tool_name", "row_count", "truncated", "execution"]
    list_select_related = ["execution"]
    fields = ["execution", "tool_name", "tool_call_id", "sql", "row_count", "truncated",
              "preview", "download"]  # fmt: skip
    readonly_fields = ["execution", "tool_name", "tool_call_id", "sql", "row_count", "truncated",
                       "preview", "download"]  # fmt: skip

    def get_queryset(self, request: HttpRequest) -> Any:
        return super().get_queryset(request).defer("csv")

    def get_urls(self) -> list[URLPattern]:
        download = path(
            "<path:object_id>/download/",
            self.admin_site.admin_view(self.download_view),
            name="datasets_datasetresult_download",
        )
        return [download, *super().get_urls()]

    def download_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        result = self.get_object(request, object_id)
        if result is None or not self.has_view_permission(request, result):
            from django.http import Http404  # noqa: PLC0415

            raise Http404("No such result.")
        response = HttpResponse(bytes(result.csv), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = (
            f'attachment; filename="{result.tool_name}-{str(result.pk)[:8]}.csv"'
        )
        return response

    @admin.display(description="first rows")
    def preview(self, obj: DatasetResult) -> SafeString | str:
        full = DatasetResult.objects.only("csv").get(pk=obj.pk)
        return result_table(full)

    @admin.display(description="download")
    def download(self, obj: DatasetResult) -> SafeString:
        return format_html('<a href="{}">CSV, {} rows</a>', _download_url(obj), obj.row_count)


def result_table(result: DatasetResult) -> SafeString | str:
    """The first rows of a result as a small table."""
    reader = csv.reader(io.StringIO(bytes(result.csv).decode()))
    rows = [row for _, row in zip(range(PREVIEW_ROWS + 1), reader, strict=False)]
    if not rows:
        return EMPTY
    head = format_html_join("", f'<th style="{CELL}">{{}}</th>', ((c,) for c in rows[0]))
    body = format_html_join(
        "",
        "<tr>{}</tr>",
        (
            (format_html_join("", f'<td style="{CELL}">{{}}</td>', ((v,) for v in row)),)
            for row in rows[1:]
        ),
    )
    return format_html(
        '<table class="dataset-result"><thead><tr>{}</tr></thead><tbody>{}</tbody></table>',
        head,
        body,
    )


def results_panel(execution: Execution) -> SafeString | str:
    """The run page's table results: each call's SQL, first rows and a download link."""
    results = list(
        selectors.results_of_run(execution_id=execution.id).defer(None).order_by("created_at")
    )
    if not results:
        return EMPTY
    return format_html_join(
        "",
        '<div class="dataset-result-of-run" style="margin-bottom: 12px">'
        '<div><code>{}</code></div>{}<div>{} rows{} · <a href="{}">download CSV</a></div></div>',
        (
            (
                r.sql,
                result_table(r),
                r.row_count,
                " (cut at the row limit)" if r.truncated else "",
                _download_url(r),
            )
            for r in results
        ),
    )


panels.RUN_PANELS.register(
    panels.RunPanel(
        order=30, name="dataset_results", title="Table results", label="Results",
        render=results_panel,
        shown=lambda execution: selectors.results_of_run(execution_id=execution.id).exists(),
    )
)  # fmt: skip
