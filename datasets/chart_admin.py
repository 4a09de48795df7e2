"""A run's charts on its run page (the "Charts" panel, agents/admin/panels.py) and the image
behind each: served under the run's admin URL (``admin:agents_execution_chart``), so only staff
of the run's agency reach it (the execution admin's agency-scoped queryset, then row-level
security on the chart: another agency's run or chart is a 404)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from django.http import Http404, HttpRequest, HttpResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from agents.admin import panels
from agents.admin.common import EMPTY
from agents.models import Execution
from datasets import selectors

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin


def chart_url(execution_id: Any, chart_id: Any) -> str:
    return reverse("admin:agents_execution_chart", args=[execution_id, chart_id])


def chart_image(
    model_admin: ModelAdmin[Any], request: HttpRequest, object_id: str, chart_id: str
) -> HttpResponse:
    if not model_admin.has_view_permission(request):
        raise Http404("No such chart.")
    execution = model_admin.get_object(request, object_id)
    try:
        wanted = uuid.UUID(chart_id)
    except ValueError:
        wanted = None
    chart = (
        selectors.chart_of_run(execution_id=execution.pk, chart_id=wanted)
        if execution is not None and wanted is not None
        else None
    )
    if chart is None:
        raise Http404("No such chart.")
    response = HttpResponse(bytes(chart.png), content_type="image/png")
    response["X-Content-Type-Options"] = "nosniff"
    # Only this member's browser may keep it, and it asks again each time: no shared cache ever
    # holds one agency's chart for another's staff.
    response["Cache-Control"] = "private, no-store"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    response["Content-Disposition"] = f'inline; filename="chart-{str(chart.pk)[:8]}.png"'
    return response


def run_urls(model_admin: ModelAdmin[Any]) -> list[URLPattern]:
    def view(request: HttpRequest, object_id: str, chart_id: str) -> HttpResponse:
        return chart_image(model_admin, request, object_id, chart_id)

    return [
        path(
            "<path:object_id>/charts/<str:chart_id>.png",
            model_admin.admin_site.admin_view(view),
            name="agents_execution_chart",
        )
    ]


def charts_panel(execution: Execution) -> SafeString | str:
    """Each chart of the run as an image, scaled down to the page's width."""
    charts = list(selectors.charts_of_run(execution_id=execution.id))
    if not charts:
        return EMPTY
    return format_html(
        '<div class="dataset-charts" style="display: flex; flex-wrap: wrap; gap: 16px">{}</div>',
        format_html_join(
            "",
            '<figure class="dataset-chart" style="margin: 0; max-width: 100%">'
            '<img src="{}" alt="{}" width="{}" height="{}" loading="lazy" '
            'style="max-width: 100%; height: auto; background: #fff; border-radius: 4px">'
            '<figcaption style="font-size: 12px; opacity: .75">{} · {} &times; {} px</figcaption>'
            "</figure>",
            (
                (
                    chart_url(execution.pk, chart.pk),
                    f"Chart {number} of the run ({chart.tool_name})",
                    chart.width,
                    chart.height,
                    f"Chart {number}, {chart.tool_name}",
                    chart.width,
                    chart.height,
                )
                for number, chart in enumerate(charts, start=1)
            ),
        ),
    )


panels.RUN_PANELS.register(
    panels.RunPanel(
        order=31, name="dataset_charts", title="Charts", label="Charts",
        render=charts_panel,
        shown=lambda execution: selectors.charts_of_run(execution_id=execution.id).exists(),
    )
)  # fmt: skip
panels.RUN_URLS.register(panels.RunUrls(order=30, name="dataset_charts", urls=run_urls))
