"""The analysis tools over an agency's datasets (issue 30, seed 002): ``list_datasets``,
``get_dataset_schema``, ``execute_sql`` and ``execute_query_plan``.

They are built-in tools like any other (tools/registry.py loads this module; their Tool rows are
datasets 0002): the executor applies the agent's tool policy, JSON Schema validation, rate limits,
risk rules and approvals before a handler runs. A query reads only the datasets of the run's
agency (looked up under row-level security), loaded into a locked in-memory DuckDB per call.
Each result is a table artefact (:class:`datasets.models.DatasetResult`): its first rows go back
to the model, the whole of it is downloadable from the run page and the API.
"""

from __future__ import annotations

import csv
import datetime
import decimal
import io
import math
import uuid
from typing import Any

from django.conf import settings

from core import tenancy
from datasets import crm_source, engine, selectors, services, sql_policy
from datasets.models import Dataset, DatasetSource
from datasets.query_plan import PlanRefused, compile_plan
from tools.handlers import ToolContext, ToolError
from tools.registry import handler

NOT_FOUND = "not_found"
TEXT_CHARS = 300  # a long text value is cut in the inline rows (not in the download)


@handler("list_datasets")
def list_datasets(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    datasets = [
        {
            "name": d.name,
            "table": f"{engine.SCHEMA}.{d.name}",
            "title": d.title,
            "description": d.description,
            "source": d.source,
            "row_count": d.row_count,
            "columns": [column["name"] for column in d.columns],
        }
        for d in selectors.dataset_list(agency_id=ctx.agency_id)
    ]
    return {"datasets": datasets, "count": len(datasets)}


def _dataset(ctx: ToolContext, name: object) -> Dataset:
    found = selectors.dataset_list(agency_id=ctx.agency_id).filter(name=str(name)).first()
    if found is None:
        names = list(selectors.dataset_list(agency_id=ctx.agency_id).values_list("name", flat=True))
        raise ToolError(
            NOT_FOUND,
            f"There is no dataset {str(name)[:100]!r}"
            + (f"; there are: {', '.join(names[:30])}." if names else "; the agency has none."),
        )
    return found


@handler("get_dataset_schema")
def get_dataset_schema(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    dataset = _dataset(ctx, args.get("dataset"))
    return {
        "name": dataset.name,
        "table": f"{engine.SCHEMA}.{dataset.name}",
        "title": dataset.title,
        "description": dataset.description,
        "row_count": dataset.row_count,
        "columns": dataset.columns,
    }


@handler("execute_sql")
def execute_sql(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    known = set(selectors.dataset_list(agency_id=ctx.agency_id).values_list("name", flat=True))
    try:
        checked = sql_policy.check(str(args.get("sql", "")), known=known)
    except sql_policy.SqlRefused as refused:
        raise ToolError(refused.code, refused.message) from refused
    return _run(ctx, "execute_sql", checked, args)


@handler("execute_query_plan")
def execute_query_plan(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    dataset = _dataset(ctx, args.get("dataset"))
    try:
        compiled = compile_plan(args, columns=[column["name"] for column in dataset.columns])
    except PlanRefused as refused:
        raise ToolError("invalid_plan", str(refused)) from refused
    # The compiled text meets the same checks as a model's SQL: one rule set for both.
    try:
        checked = sql_policy.check(compiled, known={dataset.name})
    except sql_policy.SqlRefused as refused:
        raise ToolError(refused.code, refused.message) from refused
    return _run(ctx, "execute_query_plan", checked, args)


def _tables(ctx: ToolContext, names: tuple[str, ...]) -> list[engine.Table]:
    tables = []
    for dataset in selectors.dataset_by_names(agency_id=ctx.agency_id, names=list(names)):
        if dataset.source == DatasetSource.CRM_QUERY:
            tables.append(crm_source.table(dataset.name, dataset.query, ctx.agency_id))
        else:
            tables.append(engine.Table(name=dataset.name, parquet=bytes(dataset.data)))
    return tables


def _run(
    ctx: ToolContext, tool: str, checked: sql_policy.CheckedSql, args: dict[str, Any]
) -> dict[str, Any]:
    max_rows = settings.AGENTDESK_DATASET_RESULT_MAX_ROWS
    # The tables are read; the query runs with the step's transaction released (no database).
    with engine.sandbox(_tables(ctx, checked.datasets)) as connection, tenancy.released():
        try:
            result = engine.run(
                connection,
                checked.sql,
                max_rows=max_rows,
                timeout=settings.AGENTDESK_DATASET_QUERY_TIMEOUT_SECONDS,
            )
        except engine.QueryTimeout as error:
            raise ToolError("query_timeout", str(error)) from error
        except engine.QueryFailed as error:
            raise ToolError(
                "query_failed", f"The query failed: {error}", sql=checked.sql
            ) from error
    columns = [
        {"name": name, "type": kind}
        for name, kind in zip(result.columns, result.types, strict=True)
    ]
    saved = services.result_record(
        agency_id=ctx.agency_id,
        execution_id=ctx.execution_id,
        tool_call_id=ctx.tool_call_id,
        tool_name=tool,
        sql=checked.sql,
        columns=columns,
        row_count=len(result.rows),
        truncated=result.truncated,
        csv=_csv(result),
    )
    inline = settings.AGENTDESK_DATASET_INLINE_ROWS
    return {
        "result_id": str(saved.id),
        "sql": checked.sql,
        "columns": columns,
        "rows": [[_jsonable(v, cut=True) for v in row] for row in result.rows[:inline]],
        "row_count": len(result.rows),
        "rows_shown": min(inline, len(result.rows)),
        "truncated": result.truncated,
        "download": f"/api/v1/analysis/results/{saved.id}/download/",
    }


def _csv(result: engine.Result) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(result.columns)
    for row in result.rows:
        writer.writerow(["" if v is None else _jsonable(v, cut=False) for v in row])
    return out.getvalue().encode()


def _jsonable(value: Any, *, cut: bool) -> Any:  # noqa: PLR0911 - one return per kind
    if value is None or isinstance(value, bool | int | str):
        return value[:TEXT_CHARS] if cut and isinstance(value, str) else value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, list | tuple):
        return [_jsonable(v, cut=cut) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v, cut=cut) for k, v in value.items()}
    text = str(value)
    return text[:TEXT_CHARS] if cut else text
