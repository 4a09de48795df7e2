"""Data tools: structured queries and aggregates over an allow-list of the agency's entities.

The allow-list and the filter language live in ``_entities``; see its docstring. Results are
JSON-ready (UUIDs and datetimes as strings) and long texts are cut.
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models.functions import TruncDay, TruncMonth, TruncWeek, TruncYear

from tools.builtin import _args
from tools.builtin._args import INVALID
from tools.builtin._entities import (
    CHOICE,
    DATETIME,
    NUMBER,
    TEXT,
    UUID,
    compile_filters,
    date_bounds,
    entity_for,
    field_for,
)
from tools.handlers import ToolContext, ToolError
from tools.registry import handler

MAX_ROWS = 100
MAX_GROUPS = 100
OUTPUT_TEXT_CHARS = 300
METRICS = ("count", "sum", "avg", "min", "max")
_AGGREGATES: dict[str, type[models.Aggregate]] = {
    "sum": models.Sum,
    "avg": models.Avg,
    "min": models.Min,
    "max": models.Max,
}
_TRUNCATE = {"day": TruncDay, "week": TruncWeek, "month": TruncMonth, "year": TruncYear}
SORTABLE = (TEXT, UUID, CHOICE, DATETIME, NUMBER)
GROUPABLE = (TEXT, UUID, CHOICE, NUMBER)


def _ordering(entity_name: str, order_by: object) -> list[str]:
    if order_by in (None, ""):
        return ["-created_at", "id"]
    text = str(order_by)
    name = text.removeprefix("-")
    field_for(entity_for(entity_name), name, "order_by", SORTABLE)
    return [text, "id"]


@handler("data_query")
def data_query(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    entity = entity_for(args.get("entity_type"))
    name = str(args["entity_type"])
    limit = _args.bounded_int(args, "limit", default=MAX_ROWS, high=MAX_ROWS)
    queryset = entity.queryset(ctx.agency_id).filter(compile_filters(entity, args.get("filters")))
    columns = list(entity.fields)
    rows = list(
        queryset.order_by(*_ordering(name, args.get("order_by"))).values(*columns)[: limit + 1]
    )
    return {
        "entity_type": name,
        "rows": [
            {
                column: _args.jsonable(row[column], text_limit=OUTPUT_TEXT_CHARS)
                for column in columns
            }
            for row in rows[:limit]
        ],
        "count": min(len(rows), limit),
        "has_more": len(rows) > limit,
    }


def _metric(entity_name: str, metric: object) -> tuple[str, str]:
    """``"count"`` or ``"<sum|avg|min|max>:<field>"`` -> (function, field)."""
    entity = entity_for(entity_name)
    text = str(metric or "").strip().lower()
    function, _, field = text.partition(":")
    function = function.strip()
    field = field.strip()
    if function not in METRICS:
        raise ToolError(
            INVALID,
            f"Unknown metric {text[:40]!r}. Use 'count' or '<function>:<field>' with function "
            f"one of {', '.join(METRICS[1:])}, e.g. 'avg:duration_minutes'.",
        )
    if function == "count":  # "count:<field>" counts rows where the field is set
        if field:
            field_for(entity, field, "Metric 'count'")
        return function, field
    kinds = (NUMBER,) if function in ("sum", "avg") else (NUMBER, DATETIME)
    if not field:
        raise ToolError(INVALID, f"Metric '{function}' needs a field: '{function}:<field>'.")
    field_for(entity, field, f"Metric '{function}'", kinds)
    return function, field


def _group(entity_name: str, group_by: object) -> tuple[str, Any]:
    """``"status"`` or ``"created_at:month"`` -> (label, expression)."""
    entity = entity_for(entity_name)
    text = str(group_by)
    name, _, period = text.partition(":")
    if period:
        field_for(entity, name, "group_by", (DATETIME,))
        if period not in _TRUNCATE:
            raise ToolError(
                INVALID, f"group_by period must be one of {', '.join(_TRUNCATE)}: 'field:period'."
            )
        return text, _TRUNCATE[period](name)
    spec = field_for(entity, name, "group_by (date fields need ':day', ':week', ...)", GROUPABLE)
    return text, spec.expression if spec.expression is not None else models.F(name)


@handler("data_aggregate")
def data_aggregate(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    entity = entity_for(args.get("entity_type"))
    name = str(args["entity_type"])
    function, field = _metric(name, args.get("metric"))
    queryset = entity.queryset(ctx.agency_id)
    if args.get("date_range") is not None:
        start, end, date_field = date_bounds(args["date_range"])
        date_field = date_field or entity.date_field
        field_for(entity, date_field, "date_range.field", (DATETIME,))
        if start is not None:
            queryset = queryset.filter(**{f"{date_field}__gte": start})
        if end is not None:
            queryset = queryset.filter(**{f"{date_field}__lt": end})
    if function == "count":
        value_expr: models.Aggregate = models.Count(field or "pk")
    else:
        value_expr = _AGGREGATES[function](field)
    metric = f"{function}:{field}" if field else function
    result: dict[str, Any] = {"entity_type": name, "metric": metric}
    if not args.get("group_by"):
        value = queryset.aggregate(value=value_expr)["value"]
        return {**result, "value": _args.jsonable(value)}
    label, expression = _group(name, args["group_by"])
    grouped = (
        queryset.annotate(group_key=expression)
        .values("group_key")
        .annotate(value=value_expr)
        .order_by(models.F("group_key").asc(nulls_last=True))
    )
    rows = list(grouped[: MAX_GROUPS + 1])
    groups = [
        {"key": _args.jsonable(row["group_key"]), "value": _args.jsonable(row["value"])}
        for row in rows[:MAX_GROUPS]
    ]
    return {**result, "group_by": label, "groups": groups, "truncated": len(rows) > MAX_GROUPS}
