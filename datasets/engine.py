"""DuckDB, locked down: one in-memory database per use, holding only the tables it is given.

Tables are loaded while the connection may still read the temporary files they were written to;
then file access is switched off and the configuration locked, so nothing the query says can
read a file or URL, attach a database, load an extension or undo either setting. This is the
second fence behind :mod:`datasets.sql_policy`'s parse (a query that slipped through it still
meets a database that can reach nothing but its tables).
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
from django.conf import settings

SCHEMA = "datasets"  # the schema every dataset's table is in: datasets.<name>


class QueryTimeout(Exception):
    """The query ran past its deadline and was interrupted."""


class QueryFailed(Exception):
    """DuckDB refused or failed the query (a wrong column, a type error, a locked feature)."""


@dataclass(frozen=True)
class Table:
    """A table to load: Parquet bytes, or rows with their (name, DuckDB type) columns."""

    name: str
    parquet: bytes = b""
    columns: Sequence[tuple[str, str]] = ()
    rows: Sequence[Sequence[Any]] = ()


@dataclass(frozen=True)
class Result:
    columns: list[str]
    types: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool


def quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def connect() -> duckdb.DuckDBPyConnection:
    """A fresh in-memory DuckDB: no extension installed or loaded on its own, one thread, a
    memory limit, no temporary directory (nothing spills to disk)."""
    return duckdb.connect(
        ":memory:",
        config={
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "threads": 1,
            "memory_limit": f"{settings.AGENTDESK_DATASET_MEMORY_LIMIT_MB}MB",
        },
    )


def lock(connection: duckdb.DuckDBPyConnection) -> None:
    connection.execute("SET enable_external_access = false")
    connection.execute("SET lock_configuration = true")


@contextlib.contextmanager
def sandbox(tables: Sequence[Table]) -> Iterator[duckdb.DuckDBPyConnection]:
    """A locked connection with ``tables`` in schema ``datasets``; closed on exit."""
    connection = connect()
    try:
        connection.execute(f"CREATE SCHEMA {SCHEMA}")
        with tempfile.TemporaryDirectory(prefix="agentdesk-ds-") as folder:
            for number, table in enumerate(tables):
                target = f"{SCHEMA}.{quote(table.name)}"
                if table.parquet:
                    path = Path(folder) / f"{number}.parquet"
                    path.write_bytes(table.parquet)
                    connection.execute(
                        f"CREATE TABLE {target} AS SELECT * FROM read_parquet(?)", [str(path)]
                    )
                    path.unlink()
                else:
                    create_from_rows(connection, target, table)
        lock(connection)
        yield connection
    finally:
        connection.close()


def create_from_rows(connection: duckdb.DuckDBPyConnection, target: str, table: Table) -> None:
    definition = ", ".join(f"{quote(name)} {kind}" for name, kind in table.columns)
    connection.execute(f"CREATE TABLE {target} ({definition})")
    if table.rows:
        marks = ", ".join("?" for _ in table.columns)
        connection.executemany(f"INSERT INTO {target} VALUES ({marks})", list(table.rows))


def run(
    connection: duckdb.DuckDBPyConnection, sql: str, *, max_rows: int, timeout: float
) -> Result:
    """Run one checked query, keeping at most ``max_rows`` rows; interrupted past ``timeout``."""
    timed_out = threading.Event()

    def interrupt() -> None:
        timed_out.set()
        connection.interrupt()

    timer = threading.Timer(timeout, interrupt)
    timer.start()
    try:
        # The limit in the query, not only in the fetch: DuckDB then stops producing rows.
        cursor = connection.execute(f"SELECT * FROM ({sql}) AS result LIMIT {int(max_rows) + 1}")
        rows = cursor.fetchmany(max_rows + 1)
        description = cursor.description or []
    except duckdb.InterruptException as error:
        raise QueryTimeout(f"The query ran past {timeout:g} s and was stopped.") from error
    except duckdb.Error as error:
        if timed_out.is_set():
            raise QueryTimeout(f"The query ran past {timeout:g} s and was stopped.") from error
        raise QueryFailed(_first_line(str(error))) from error
    finally:
        timer.cancel()
    return Result(
        columns=[str(column[0]) for column in description],
        types=[str(column[1]) for column in description],
        rows=rows[:max_rows],
        truncated=len(rows) > max_rows,
    )


def _first_line(message: str) -> str:
    return message.strip().splitlines()[0][:500] if message.strip() else "The query failed."
