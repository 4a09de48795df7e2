"""``execute_python`` (issue 30): a pandas/numpy/matplotlib script over the agency's datasets, run
in the sandbox (tools/sandbox/, README "Python sandbox"), never in the worker.

A built-in tool like the others (tools/registry.py loads this module; its Tool row is datasets
0003): the executor applies the agent's tool policy, JSON Schema validation, rate limits, risk
rules and approvals before the handler runs. The named datasets (the agency's only, read under
row-level security) are written as CSV files to a folder of this call and given to the script
read-only as /data/<name>.csv. A table the script leaves in ``result`` becomes a table artefact
(datasets.models.DatasetResult, as execute_sql's: first rows inline, all of it downloadable);
the figures it leaves open come back as PNG chart artefacts (datasets/charts.py: the model is
told their ids); every refusal or overrun is a structured tool error, and the run goes on. The
script's CPU seconds are in the call's recorded output (or its error's details).
"""

from __future__ import annotations

import csv
import io
import tempfile
from pathlib import Path
from typing import Any

from django.conf import settings

from core import tenancy
from datasets import charts, crm_source, engine, selectors, services
from datasets.models import Dataset, DatasetSource
from tools import sandbox
from tools.handlers import ToolContext, ToolError
from tools.registry import handler

MAX_DATASETS = 10


def _write_csv(dataset: Dataset, folder: Path) -> Path:
    if dataset.source == DatasetSource.CRM_QUERY:
        table = crm_source.table(dataset.name, dataset.query, dataset.agency_id)
    else:
        table = engine.Table(name=dataset.name, parquet=bytes(dataset.data))
    with engine.sandbox([table]) as connection:
        try:
            result = engine.run(
                connection,
                # The name is the dataset's own (a checked identifier), quoted.
                f"SELECT * FROM {engine.SCHEMA}.{engine.quote(dataset.name)}",  # noqa: S608
                max_rows=settings.AGENTDESK_DATASET_MAX_ROWS,
                timeout=settings.AGENTDESK_DATASET_QUERY_TIMEOUT_SECONDS,
            )
        except (engine.QueryTimeout, engine.QueryFailed) as error:
            raise ToolError("dataset_unreadable", f"{dataset.name}: {error}") from error
    path = folder / f"{dataset.name}.csv"
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(result.columns)
        for row in result.rows:
            writer.writerow(["" if value is None else value for value in row])
    path.chmod(0o644)  # read by the sandbox's unprivileged user
    return path


@handler("execute_python")
def execute_python(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    names = list(dict.fromkeys(str(n) for n in args.get("datasets") or []))[:MAX_DATASETS]
    found = selectors.dataset_by_names(agency_id=ctx.agency_id, names=names)
    missing = sorted(set(names) - {d.name for d in found})
    if missing:
        raise ToolError("not_found", f"There is no dataset {', '.join(missing)!s}.")
    code = str(args.get("code", ""))
    with tempfile.TemporaryDirectory(prefix="agentdesk-python-") as folder:
        files = {f"{d.name}.csv": _write_csv(d, Path(folder)) for d in found}
        try:
            # The files are written: the script runs with the step's transaction released.
            with tenancy.released():
                result = sandbox.executor().run(sandbox.SandboxRequest(code=code, files=files))
        except sandbox.SandboxError as error:
            raise ToolError("sandbox_unavailable", str(error)) from error
    spent = {"cpu_seconds": result.cpu_seconds, "wall_seconds": result.wall_seconds}
    if result.status == "policy":
        raise ToolError("policy_refused", f"The script was refused: {result.error}")
    if result.status != "ok":
        raise ToolError(
            "script_error" if result.status == "error" else result.status,
            result.error or f"The script ended with {result.status}.",
            stdout=result.stdout[-2000:],
            **spent,
        )
    output: dict[str, Any] = {
        "stdout": result.stdout,
        "stdout_truncated": result.stdout_truncated,
        **spent,
    }
    output |= _charts(ctx, result.charts)
    if result.value is not None:
        output["value"] = result.value
    if result.table is not None:
        output |= _table(ctx, code, result.table)
    return output


def _charts(ctx: ToolContext, pngs: list[bytes]) -> dict[str, Any]:
    """The charts kept as artefacts of the call: the model gets their ids, not their bytes."""
    kept = charts.charts_keep(
        agency_id=ctx.agency_id,
        execution_id=ctx.execution_id,
        tool_call_id=ctx.tool_call_id,
        tool_name="execute_python",
        charts=pngs,
    )
    output: dict[str, Any] = {"charts": len(kept.ids)}
    if kept.ids:
        output["chart_ids"] = kept.ids
        output["charts_shown"] = "on the run page, under Charts"
    if kept.dropped:
        output["charts_dropped"] = kept.dropped
    return output


def _table(ctx: ToolContext, code: str, table: sandbox.Table) -> dict[str, Any]:
    body = io.StringIO()
    writer = csv.writer(body)
    writer.writerow(table.columns)
    writer.writerows([["" if v is None else v for v in row] for row in table.rows])
    columns = [{"name": name, "type": ""} for name in table.columns]
    saved = services.result_record(
        agency_id=ctx.agency_id,
        execution_id=ctx.execution_id,
        tool_call_id=ctx.tool_call_id,
        tool_name="execute_python",
        sql=code,
        columns=columns,
        row_count=len(table.rows),
        truncated=table.truncated,
        csv=body.getvalue().encode(),
    )
    inline = settings.AGENTDESK_DATASET_INLINE_ROWS
    return {
        "result_id": str(saved.id),
        "columns": columns,
        "rows": table.rows[:inline],
        "row_count": table.row_count,
        "rows_shown": min(inline, len(table.rows)),
        "truncated": table.truncated,
        "download": f"/api/v1/analysis/results/{saved.id}/download/",
    }
