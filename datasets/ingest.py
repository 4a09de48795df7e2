"""A file staff upload -> the dataset's Parquet bytes and inferred schema.

CSV and Parquet are read by DuckDB itself; XLSX by openpyxl (DuckDB's excel extension would be
downloaded at run time, and these machines reach no extension repository), its first sheet
written as CSV for DuckDB to type the columns the same way as an uploaded CSV's.
"""

from __future__ import annotations

import csv
import datetime
import io
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
from django.conf import settings

from core.exceptions import ApplicationError
from datasets import engine
from datasets.models import DatasetFormat

SAMPLES = 5
SAMPLE_CHARS = 80
MAX_COLUMNS = 200
PARQUET_MAGIC = b"PAR1"
ZIP_MAGIC = b"PK\x03\x04"


@dataclass(frozen=True)
class Ingested:
    parquet: bytes
    columns: list[dict[str, Any]]
    row_count: int
    size_bytes: int  # of the file as uploaded


def format_of(file_name: str, declared: str = "") -> str:
    """The upload's format: the one declared, else its file name's extension."""
    if declared:
        if declared not in (DatasetFormat.CSV, DatasetFormat.XLSX, DatasetFormat.PARQUET):
            raise ApplicationError(
                "invalid_format", "format must be csv, xlsx or parquet.", status=422
            )
        return declared
    suffix = Path(file_name).suffix.lower().lstrip(".")
    if suffix in ("csv", "txt"):
        return DatasetFormat.CSV
    if suffix == "xlsx":
        return DatasetFormat.XLSX
    if suffix in ("parquet", "pq"):
        return DatasetFormat.PARQUET
    raise ApplicationError(
        "invalid_format",
        f"Cannot tell the format of {file_name[:100]!r}: name it .csv, .xlsx or .parquet, "
        "or give format.",
        status=422,
    )


def ingest(content: bytes, file_format: str) -> Ingested:
    """Read ``content`` as ``file_format``; a file it cannot be read as is a 400 naming why."""
    if not content:
        raise ApplicationError("invalid_file", "The file is empty.", status=422)
    if len(content) > settings.AGENTDESK_DATASET_MAX_UPLOAD_BYTES:
        raise ApplicationError(
            "file_too_large",
            f"The file has {len(content)} bytes; the limit is "
            f"{settings.AGENTDESK_DATASET_MAX_UPLOAD_BYTES} (AGENTDESK_DATASET_MAX_UPLOAD_BYTES).",
            status=422,
        )
    size = len(content)
    if file_format == DatasetFormat.XLSX:
        content, file_format = _xlsx_as_csv(content), DatasetFormat.CSV
    if file_format == DatasetFormat.PARQUET and not content.startswith(PARQUET_MAGIC):
        raise ApplicationError("invalid_file", "The file is not a Parquet file.", status=422)
    connection = engine.connect()
    try:
        with tempfile.TemporaryDirectory(prefix="agentdesk-up-") as folder:
            source = Path(folder) / f"upload.{file_format}"
            source.write_bytes(content)
            reader = "read_parquet(?)" if file_format == DatasetFormat.PARQUET else "read_csv(?)"
            try:
                connection.execute(f"CREATE TABLE data AS SELECT * FROM {reader}", [str(source)])
            except duckdb.Error as error:
                raise ApplicationError(
                    "invalid_file",
                    f"The file could not be read as {file_format.upper()}: "
                    f"{str(error).strip().splitlines()[0][:300]}",
                    status=422,
                ) from error
            source.unlink()
            columns, row_count = _schema(connection, "data")
            target = Path(folder) / "data.parquet"
            connection.execute("COPY data TO ? (FORMAT parquet, COMPRESSION zstd)", [str(target)])
            return Ingested(target.read_bytes(), columns, row_count, size)
    finally:
        connection.close()


def _schema(connection: duckdb.DuckDBPyConnection, table: str) -> tuple[list[dict[str, Any]], int]:
    described = connection.execute(f"DESCRIBE {table}").fetchall()
    if not described:
        raise ApplicationError("invalid_file", "The file has no columns.", status=422)
    if len(described) > MAX_COLUMNS:
        raise ApplicationError(
            "invalid_file",
            f"The file has {len(described)} columns; the limit is {MAX_COLUMNS}.",
            status=422,
        )
    row = connection.execute(f"SELECT count(*) FROM {table}").fetchone()
    row_count = int(row[0]) if row else 0
    if row_count > settings.AGENTDESK_DATASET_MAX_ROWS:
        raise ApplicationError(
            "too_many_rows",
            f"The file has {row_count} rows; the limit is {settings.AGENTDESK_DATASET_MAX_ROWS} "
            "(AGENTDESK_DATASET_MAX_ROWS).",
            status=422,
        )
    return [
        {
            "name": str(name),
            "type": str(kind),
            "samples": samples(connection, table, str(name)),
            "description": "",
        }
        for name, kind, *_ in described
    ], row_count


def samples(connection: duckdb.DuckDBPyConnection, table: str, column: str) -> list[str]:
    """Up to SAMPLES distinct values of a column, as text, in a stable order."""
    quoted = engine.quote(column)
    rows = connection.execute(
        f"SELECT DISTINCT CAST({quoted} AS VARCHAR) AS v FROM {table} "
        f"WHERE {quoted} IS NOT NULL ORDER BY v LIMIT {SAMPLES}"
    ).fetchall()
    return [str(value)[:SAMPLE_CHARS] for (value,) in rows]


def _xlsx_as_csv(content: bytes) -> bytes:
    """The first sheet of a workbook as CSV: its first row the header, dates in ISO form."""
    import openpyxl  # noqa: PLC0415 - only uploads of workbooks pay for its import

    if not content.startswith(ZIP_MAGIC):
        raise ApplicationError("invalid_file", "The file is not an XLSX workbook.", status=422)
    try:
        book = openpyxl.load_workbook(io.BytesIO(content), read_only=True, data_only=True)
    except Exception as error:  # openpyxl raises many kinds on a malformed workbook
        raise ApplicationError(
            "invalid_file", f"The workbook could not be read: {error}", status=422
        ) from error
    try:
        sheet = book.worksheets[0] if book.worksheets else None
        if sheet is None:
            raise ApplicationError("invalid_file", "The workbook has no sheet.", status=422)
        out = io.StringIO()
        writer = csv.writer(out)
        for row in sheet.iter_rows(values_only=True):
            if all(value is None for value in row):
                continue
            writer.writerow(["" if value is None else _cell(value) for value in row])
    finally:
        book.close()
    if not out.getvalue():
        raise ApplicationError("invalid_file", "The workbook's first sheet is empty.", status=422)
    return out.getvalue().encode()


def _cell(value: object) -> str:
    # A workbook's dates are datetimes at midnight: a column of them is a DATE column.
    if (
        isinstance(value, datetime.datetime)
        and value.time() == datetime.time()
        and not value.tzinfo
    ):
        return value.date().isoformat()
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    return str(value)


def describe(table: engine.Table) -> tuple[list[dict[str, Any]], int]:
    """The schema and row count of a table given as rows (a CRM query's, now)."""
    connection = engine.connect()
    try:
        engine.create_from_rows(connection, "data", table)
        return _schema(connection, "data")
    finally:
        connection.close()
