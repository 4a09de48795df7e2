"""Small files of each upload format, made here (no fixture files to keep in step)."""

from __future__ import annotations

import datetime
import io
import tempfile
from pathlib import Path

import duckdb
import openpyxl

SALES_CSV = (
    b"region,amount,order_date,status\n"
    b"north,10.5,2030-01-05,paid\n"
    b"south,20,2030-01-20,paid\n"
    b"north,7.25,2030-02-11,refunded\n"
    b"east,3,2030-02-28,paid\n"
)


def xlsx(rows: list[list[object]]) -> bytes:
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    for row in rows:
        sheet.append(row)
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


SALES_XLSX_ROWS: list[list[object]] = [
    ["region", "amount", "order_date"],
    ["north", 10.5, datetime.date(2030, 1, 5)],
    ["south", 20, datetime.date(2030, 1, 20)],
    ["west", 1, datetime.date(2030, 3, 1)],
]


def parquet(select: str = "SELECT range AS id, 'item ' || range AS label FROM range(12)") -> bytes:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "x.parquet"
        connection = duckdb.connect()
        connection.execute(f"COPY ({select}) TO '{path}' (FORMAT parquet)")
        connection.close()
        return path.read_bytes()
