"""The query plan DSL (seed 002's ``execute_query_plan``): a typed description of one table query,
validated by JSON Schema and by the dataset's columns, compiled deterministically to DuckDB SQL
(the same plan always gives the same text; identifiers are quoted and values written as literals
by this module, never pasted).

    {"dataset": "sales",
     "select": [{"column": "region"},
                {"column": "order_date", "grain": "month", "as": "month"},
                {"agg": "sum", "column": "amount", "as": "total"}],
     "filters": [{"column": "status", "op": "in", "value": ["paid", "shipped"]}],
     "group_by": ["region", "month"],
     "order_by": [{"column": "total", "direction": "desc"}],
     "limit": 20}

Rules beyond the schema: columns exist in the dataset; with an aggregate in ``select`` every plain
column selected is grouped on (and only then may ``group_by`` be given); ``order_by`` names a
selected output; output names are unique.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Collection, Mapping
from typing import Any

from datasets.engine import SCHEMA, quote

AGGREGATES = ("count", "count_distinct", "sum", "avg", "min", "max")
OPERATORS = (
    "eq",
    "neq",
    "gt",
    "gte",
    "lt",
    "lte",
    "in",
    "not_in",
    "contains",
    "is_null",
    "not_null",
    "between",
)
GRAINS = ("day", "week", "month", "quarter", "year")
MAX_LIMIT = 10_000
# The tool's parameters (datasets 0002 seeds a frozen copy; a test keeps the two equal).
DATASET = {
    "type": "string",
    "pattern": "^[a-z][a-z0-9_]{0,62}$",
    "description": "The dataset's name, as list_datasets gives it.",
}
_COLUMN = {"type": "string", "minLength": 1, "maxLength": 200}
_NAME = {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]{0,62}$"}
_SCALAR = {"type": ["string", "number", "boolean"]}
SCHEMA_JSON: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["dataset", "select"],
    "properties": {
        "dataset": DATASET,
        "select": {
            "type": "array",
            "minItems": 1,
            "maxItems": 50,
            "description": "Output columns: a column, a date column truncated to a grain, or an "
            "aggregate (count needs no column).",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "column": _COLUMN,
                    "agg": {
                        "type": "string",
                        "enum": list(AGGREGATES),
                    },
                    "grain": {
                        "type": "string",
                        "enum": list(GRAINS),
                    },
                    "as": _NAME,
                },
            },
        },
        "filters": {
            "type": "array",
            "maxItems": 50,
            "description": "Conditions, all of which must hold.",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["column", "op"],
                "properties": {
                    "column": _COLUMN,
                    "op": {
                        "type": "string",
                        "enum": list(OPERATORS),
                    },
                    "value": {
                        "anyOf": [
                            _SCALAR,
                            {"type": "array", "items": _SCALAR, "minItems": 1, "maxItems": 1000},
                        ]
                    },
                },
            },
        },
        "group_by": {
            "type": "array",
            "maxItems": 20,
            "items": _COLUMN,
            "description": "Columns or select outputs to group on (every plain selected column "
            "when select has an aggregate).",
        },
        "order_by": {
            "type": "array",
            "maxItems": 10,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["column"],
                "properties": {
                    "column": _COLUMN,
                    "direction": {"type": "string", "enum": ["asc", "desc"]},
                },
            },
        },
        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
    },
}


class PlanRefused(Exception):
    """The plan does not fit its dataset or the rules; the message says what to change."""


def compile_plan(plan: Mapping[str, Any], *, columns: Collection[str]) -> str:
    """The plan as one DuckDB SELECT; ``columns`` are its dataset's column names."""
    dataset = str(plan["dataset"])
    known = set(columns)
    outputs: list[str] = []
    select_sql: list[str] = []
    plain: dict[str, str] = {}  # output name -> its expression, for the non-aggregates
    aggregated = False
    for item in plan["select"]:
        expression, name, is_aggregate = _select_item(item, known)
        if name in outputs:
            raise PlanRefused(f"Two selected outputs are named {name!r}: give one an 'as'.")
        outputs.append(name)
        select_sql.append(f"{expression} AS {quote(name)}")
        aggregated = aggregated or is_aggregate
        if not is_aggregate:
            plain[name] = expression
    sql = f"SELECT {', '.join(select_sql)} FROM {SCHEMA}.{quote(dataset)}"
    filters = [_filter(f, known) for f in plan.get("filters") or []]
    if filters:
        sql += " WHERE " + " AND ".join(filters)
    sql += _grouping(plan.get("group_by") or [], plain, known, aggregated=aggregated)
    order = [_order(o, outputs) for o in plan.get("order_by") or []]
    if order:
        sql += " ORDER BY " + ", ".join(order)
    if plan.get("limit") is not None:
        sql += f" LIMIT {int(plan['limit'])}"
    return sql


def _column(name: object, known: set[str], where: str) -> str:
    text = str(name)
    if text not in known:
        raise PlanRefused(
            f"{where}: there is no column {text[:100]!r} in the dataset "
            f"(its columns: {', '.join(sorted(known)[:60])})."
        )
    return quote(text)


def _select_item(item: Mapping[str, Any], known: set[str]) -> tuple[str, str, bool]:
    agg, column, grain = item.get("agg"), item.get("column"), item.get("grain")
    if agg is not None and grain is not None:
        raise PlanRefused("A select item has either 'agg' or 'grain', not both.")
    if agg is None:
        if column is None:
            raise PlanRefused("A select item without 'agg' needs a 'column'.")
        expression = _column(column, known, "select")
        if grain is not None:
            expression = f"CAST(date_trunc('{grain}', {expression}) AS DATE)"
        return expression, str(item.get("as") or column), False
    if column is None:
        if agg != "count":
            raise PlanRefused(f"Aggregate {agg!r} needs a 'column'.")
        return "count(*)", str(item.get("as") or "count"), True
    quoted = _column(column, known, f"select ({agg})")
    expression = f"count(DISTINCT {quoted})" if agg == "count_distinct" else f"{agg}({quoted})"
    return expression, str(item.get("as") or f"{agg}_{column}"), True


def _grouping(
    group_by: list[Any], plain: dict[str, str], known: set[str], *, aggregated: bool
) -> str:
    if not aggregated:
        if group_by:
            raise PlanRefused("group_by needs an aggregate (agg) in select.")
        return ""
    expressions: list[str] = []
    for name in group_by:
        text = str(name)
        if text in plain:
            expressions.append(plain[text])
        else:
            expressions.append(_column(text, known, "group_by"))
    missing = [name for name, expression in plain.items() if expression not in expressions]
    if missing:
        raise PlanRefused(
            f"Selected column(s) {', '.join(missing)} must be in group_by when select has an "
            "aggregate."
        )
    return " GROUP BY " + ", ".join(expressions) if expressions else ""


def _order(item: Mapping[str, Any], outputs: list[str]) -> str:
    name = str(item["column"])
    if name not in outputs:
        raise PlanRefused(
            f"order_by: {name[:100]!r} is not a selected output ({', '.join(outputs)})."
        )
    direction = "DESC" if item.get("direction") == "desc" else "ASC"
    return f"{quote(name)} {direction} NULLS LAST"


def _filter(item: Mapping[str, Any], known: set[str]) -> str:
    column = _column(item["column"], known, "filters")
    op = item["op"]
    value = item.get("value")
    if op in ("is_null", "not_null"):
        return f"{column} IS {'NOT ' if op == 'not_null' else ''}NULL"
    if value is None:
        raise PlanRefused(f"Filter {op!r} on {item['column']!r} needs a 'value'.")
    if op in ("in", "not_in"):
        values = value if isinstance(value, list) else [value]
        listed = ", ".join(literal(v) for v in values)
        return f"{column} {'NOT ' if op == 'not_in' else ''}IN ({listed})"
    if op == "between":
        if not isinstance(value, list) or len(value) != 2:
            raise PlanRefused("Filter 'between' needs a value of two items: [low, high].")
        return f"{column} BETWEEN {literal(value[0])} AND {literal(value[1])}"
    if isinstance(value, list):
        raise PlanRefused(f"Filter {op!r} takes one value, not a list.")
    if op == "contains":
        return f"contains(CAST({column} AS VARCHAR), {literal(str(value))})"
    symbol = {"eq": "=", "neq": "<>", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}[op]
    return f"{column} {symbol} {literal(value)}"


def literal(value: object) -> str:
    """A JSON scalar as a SQL literal (strings quoted with '' doubled; no other text passes)."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise PlanRefused("Filter values must be finite numbers.")
        return repr(value)
    if isinstance(value, datetime.date):
        return f"'{value.isoformat()}'"
    text = str(value)
    return "'" + text.replace("'", "''") + "'"
