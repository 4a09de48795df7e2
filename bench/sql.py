"""execute_sql's cost (issue 30): the SQL policy alone, the whole tool call, and DuckDB bare.

    .venv/bin/python -m bench.sql [--rows 100000 --calls 100]

A demo-sized dataset (``--rows`` orders: customer, region, product, order date, quantity, amount)
is uploaded as staff upload one (CSV read, schema inferred, kept as Parquet in its PostgreSQL row).
Then ``--calls`` rounds, interleaved so every series sees the same load, of one typical analyst
query (revenue and orders per region, biggest first):

- **policy**: ``sql_policy.check`` alone (sqlglot parses the SQL, walks it, rewrites the tables);
- **tool call**: ``execute_sql`` through the real tool executor, as a worker runs it in a run's
  step: the agency's transaction (row-level security), the call's JSON Schema and gates, the
  policy, the dataset's Parquet read from PostgreSQL, a locked in-memory DuckDB per call, the
  query, the table artefact and the ToolCall row written, committed;
- **DuckDB, loaded**: the same query on a DuckDB connection that already holds the table (the
  engine's own cost: the floor);
- **DuckDB, load + query**: a fresh in-memory connection, the Parquet bytes loaded, the query
  (what the tool must do per call, without the policy and the database).

Per series: wall p50/p95 and the ratio of p50s to DuckDB's bare query. Prints the machine facts
of the same run: cores, load average before and after, PostgreSQL round trip and durable commit,
DuckDB's and sqlglot's versions.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

from django.db import transaction

from bench import common

QUERY = (
    "SELECT region, SUM(amount) AS revenue, COUNT(*) AS orders, AVG(quantity) AS avg_quantity "
    "FROM datasets.orders GROUP BY region ORDER BY revenue DESC"
)
REGIONS = ("EMEA", "NA", "APAC", "LATAM")
PRODUCTS = ("starter", "pro", "enterprise", "support", "training")


def _csv(rows: int) -> bytes:
    rng = random.Random(30)
    lines = ["customer,region,product,order_date,quantity,amount"]
    for _ in range(rows):
        lines.append(
            f"customer_{rng.randint(1, 5000)},{rng.choice(REGIONS)},{rng.choice(PRODUCTS)},"
            f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d},{rng.randint(1, 20)},"
            f"{rng.random() * 5000:.2f}"
        )
    return ("\n".join(lines) + "\n").encode()


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args()
    common.create_database()
    try:
        facts = common.machine_facts()
        report = _measure(args.rows, args.calls)
    finally:
        common.drop_database()
    print(
        f"machine: {os.cpu_count()} cores, load average (1/5/15 min) before "
        f"{report.pop('load_before')}, after {report.pop('load_after')}; "
        f"Linux {platform.release()}; Python {platform.python_version()}; "
        f"DuckDB {version('duckdb')}; sqlglot {version('sqlglot')}; {facts.describe()}"
    )
    print(report.pop("header"))
    for line in report.pop("lines"):
        print(line)


def _measure(rows: int, calls: int) -> dict[str, Any]:
    import duckdb  # noqa: PLC0415 - after Django's set-up (bench/__init__)

    from agents.llm import ToolCall as LLMToolCall  # noqa: PLC0415
    from core import tenancy  # noqa: PLC0415
    from datasets import engine, sql_policy  # noqa: PLC0415
    from datasets.services import dataset_upload  # noqa: PLC0415
    from tests.agents.factories import ExecutionFactory  # noqa: PLC0415
    from tools.calls import CallRequest  # noqa: PLC0415
    from tools.executor import execute_tool_call  # noqa: PLC0415
    from tools.models import Tool  # noqa: PLC0415

    execution = ExecutionFactory.create()
    content = _csv(rows)
    with tenancy.agency_context(execution.agency_id):
        started = time.perf_counter()
        dataset = dataset_upload(
            agency=execution.agency, name="orders", file_name="orders.csv", content=content
        )
        upload_seconds = time.perf_counter() - started
    with tenancy.platform_context():
        tool = Tool.objects.get(name="execute_sql", is_system=True)
    offered: dict[str, Any] = {
        "execute_sql": {
            "name": "execute_sql",
            "description": "",
            "parameters": tool.parameters_schema,
        }
    }
    parquet = bytes(dataset.data)
    # A plain in-memory DuckDB holding the table: no policy, no lock, no database.
    loaded = duckdb.connect()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "orders.parquet"
        path.write_bytes(parquet)
        loaded.execute("CREATE SCHEMA datasets")
        loaded.execute("CREATE TABLE datasets.orders AS SELECT * FROM read_parquet(?)", [str(path)])

    checked = sql_policy.check(QUERY, known={"orders"}).sql

    def policy() -> None:
        sql_policy.check(QUERY, known={"orders"})

    def tool_call() -> None:
        call_id = f"call_{uuid.uuid4().hex[:12]}"
        request = CallRequest(
            agency_id=execution.agency_id,
            site_id=execution.site_id,
            agent_id=execution.agent_id,
            execution_id=execution.id,
            call=LLMToolCall(
                id=call_id, name="execute_sql", arguments={"sql": QUERY}, raw_arguments="{}"
            ),
            tools=offered,
            constraints=[],
            may_have_run=False,
        )
        with transaction.atomic(), tenancy.agency_context(execution.agency_id):
            outcome = execute_tool_call(request)
        assert outcome.output.get("row_count") == len(REGIONS), outcome.output

    def duckdb_loaded() -> None:
        assert len(loaded.execute(QUERY).fetchall()) == len(REGIONS)

    def duckdb_load_and_query() -> None:
        with engine.sandbox([engine.Table(name="orders", parquet=parquet)]) as fresh:
            assert len(fresh.execute(checked).fetchall()) == len(REGIONS)

    series: dict[str, Callable[[], None]] = {
        "policy check alone (sqlglot parse + walk)": policy,
        "execute_sql, the whole tool call": tool_call,
        "DuckDB bare, table loaded (the floor)": duckdb_loaded,
        "DuckDB, load Parquet + query per call": duckdb_load_and_query,
    }
    for run in series.values():  # warm-up: imports, caches, the first connection
        run()
    walls: dict[str, list[float]] = {name: [] for name in series}
    load_before = "/".join(f"{v:.1f}" for v in os.getloadavg())
    for _ in range(calls):
        for name, run in series.items():
            started = time.perf_counter()
            run()
            walls[name].append(time.perf_counter() - started)
    load_after = "/".join(f"{v:.1f}" for v in os.getloadavg())
    floor = statistics.median(walls["DuckDB bare, table loaded (the floor)"])
    lines = [
        f"{name:44} p50 {statistics.median(values) * 1000:8.2f} ms  p95 "
        f"{_p95(values) * 1000:8.2f} ms  x{statistics.median(values) / floor:7.1f} of the floor"
        for name, values in walls.items()
    ]
    return {
        "load_before": load_before,
        "load_after": load_after,
        "header": (
            f"dataset: {rows:,} rows, CSV {len(content) / 1e6:.1f} MB, Parquet "
            f"{len(parquet) / 1e6:.2f} MB (upload: read, schema, store {upload_seconds:.2f} s); "
            f"{calls} calls of each series, interleaved; query: {QUERY}"
        ),
        "lines": lines,
    }


if __name__ == "__main__":
    main()
