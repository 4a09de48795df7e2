"""The experiments' results page (issue 28): two or more experiments of one dataset side by side
(the experiments list's "Compare side by side" action, "Compare versions" on a dataset's page):
their figures with the better one marked, each case's outcome per version, and the dataset's
experiments over time as charts (unfold's Chart.js components, as the usage pages draw theirs).
The figures are evals.compare's, as the API's (``/api/v1/experiments/compare/``)."""

from __future__ import annotations

import json
import uuid
from decimal import Decimal
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from core.exceptions import ApplicationError
from evals.compare import (
    HIGHER_IS_BETTER,
    CaseOutcome,
    Comparison,
    Figures,
    compare,
    latest_per_version,
)
from evals.models import Experiment

# The figures' rows: (field, label, how a value reads).
ROWS: list[tuple[str, str, str]] = [
    ("pass_rate", "Pass rate", "percent"),
    ("cost_per_case_usd", "Cost per case", "usd"),
    ("latency_p50_ms", "Latency p50", "ms"),
    ("latency_p95_ms", "Latency p95", "ms"),
    ("steps_mean", "Steps (mean)", "number"),
    ("tokens_mean", "Tokens per case (mean)", "integer"),
    ("judge_score_mean", "Judge score (mean)", "score"),
    ("loops_flagged", "Loops flagged", "integer"),
]


def _shown(value: Any, how: str) -> str:
    if value is None:
        return "-"
    if how == "percent":
        return f"{value:.0%}"
    if how == "usd":  # (a case often costs a fraction of a cent: six decimals then)
        return f"${value:.6f}" if value < Decimal("0.01") else f"${value:.4f}"
    if how == "ms":
        return f"{value / 1000:.1f} s" if value >= 1000 else f"{value} ms"
    if how == "integer":
        return f"{value:,.0f}"
    return f"{value:.2f}" if how == "score" else f"{value:.1f}"


def _chart(labels: list[str], name: str, values: list[Any], *, y_axis: bool = True) -> str:
    # Chart.js ``data`` as usage/charts.py writes it (the first dataset carries unfold's axes;
    # unfold prints a tick's raw value, which for fractions of a cent reads 0.000719999999, so
    # the cost chart has none: its caption gives the range, a point's tooltip its value).
    color = "var(--color-primary-600)"
    return json.dumps(
        {
            "labels": labels,
            "datasets": [
                {
                    "label": name,
                    "data": values,
                    "backgroundColor": color,
                    "borderColor": color,
                    "displayYAxis": y_axis,
                    "maxTicksXLimit": 6,
                }
            ],
        }
    )


def _short(label: str) -> str:
    """ "Version 3" as v3, "Draft of version 3" as draft v3 (a chart's axis is narrow)."""
    return label.replace("Draft of version ", "draft v").replace("Version ", "v")


def _trend_charts(trend: list[Figures]) -> dict[str, str]:
    labels = [f"{_short(f.label)}, {f.experiment.created_at:%b %-d %H:%M}" for f in trend]
    rates = [round(f.pass_rate * 100, 1) for f in trend]
    costs = [float(f.cost_per_case_usd) if f.cost_per_case_usd is not None else None for f in trend]
    known = [f.cost_per_case_usd for f in trend if f.cost_per_case_usd is not None]
    return {
        "pass_rate": _chart(labels, "Pass rate (%)", rates),
        "cost": _chart(labels, "Cost per case (USD)", costs, y_axis=False),
        "cost_range": (
            f"{_shown(min(known), 'usd')} to {_shown(max(known), 'usd')}" if known else "-"
        ),
    }


def _figure_rows(comparison: Comparison) -> list[dict[str, Any]]:
    figures = comparison.figures
    return [
        {
            "label": text,
            "better": "higher is better" if HIGHER_IS_BETTER[name] else "lower is better",
            "cells": [
                {"value": _shown(getattr(f, name), how), "best": name in f.best} for f in figures
            ],
        }
        for name, text, how in ROWS
        if name != "judge_score_mean" or any(f.judge_score_mean is not None for f in figures)
    ]


def _ids(request: HttpRequest) -> list[uuid.UUID]:
    try:
        return [uuid.UUID(part) for part in request.GET.get("ids", "").split(",") if part.strip()]
    except ValueError:
        raise ApplicationError(
            "invalid_comparison", "ids: experiment ids, comma separated."
        ) from None


def _run_url(outcome: CaseOutcome | None) -> str:
    if outcome is None or outcome.execution_id is None:
        return ""
    return reverse("admin:agents_execution_change", args=[outcome.execution_id])


def compare_url(ids: list[Any]) -> str:
    return reverse("admin:evals_experiment_compare") + "?ids=" + ",".join(str(i) for i in ids)


def compare_view(
    model_admin: admin.ModelAdmin[Any], request: HttpRequest, experiments: QuerySet[Experiment]
) -> HttpResponse:
    """``experiments``: the admin's (the request's agency). ``?ids=a,b`` or ``?dataset=<id>``
    (its last experiment of each version)."""
    back = reverse("admin:evals_experiment_changelist")
    try:
        if dataset := request.GET.get("dataset"):
            ids = latest_per_version(experiments, dataset_id=uuid.UUID(dataset))
            if len(ids) < 2:
                messages.warning(
                    request, "This dataset has fewer than two completed experiments to compare."
                )
                return HttpResponseRedirect(reverse("admin:evals_dataset_change", args=[dataset]))
        else:
            ids = _ids(request)
        comparison = compare(experiments, ids)
    except (ApplicationError, ValueError) as exc:
        messages.warning(request, getattr(exc, "message", "No such dataset."))
        return HttpResponseRedirect(back)
    first = comparison.figures[0].experiment
    agents = {f.experiment.agent_id for f in comparison.figures}
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.opts,
        "app_label": model_admin.opts.app_label,
        "title": f"Compare experiments: {first.dataset_version.dataset.name}",
        "comparison": comparison,
        "columns": [
            {
                "figures": f,
                "agent": f.experiment.agent.name if len(agents) > 1 else "",
                "url": reverse("admin:evals_experiment_change", args=[f.experiment.pk]),
            }
            for f in comparison.figures
        ],
        "rows": _figure_rows(comparison),
        "cases": [
            {
                "row": row,
                "cells": [
                    (f, outcome, _run_url(outcome))
                    for f, outcome in zip(comparison.figures, row.outcomes, strict=True)
                ],
            }
            for row in comparison.cases
        ],
        "charts": _trend_charts(comparison.trend) if len(comparison.trend) > 1 else None,
        "trend_count": len(comparison.trend),
        "dataset_url": reverse(
            "admin:evals_dataset_change", args=[first.dataset_version.dataset_id]
        ),
        "back_url": back,
    }
    return TemplateResponse(request, "admin/evals/experiment/compare.html", context)
