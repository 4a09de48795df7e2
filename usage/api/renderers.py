"""``Accept: text/csv``: a list endpoint's rows as CSV, one header line of the view's columns.

Small enough not to need a library (djangorestframework-csv would add a dependency for the same
twenty lines). Cells a spreadsheet would run as a formula are quoted (names are typed by agency
staff), as in the admin's CSV export (``usage.admin_mixins``).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from typing import Any

from rest_framework.renderers import BaseRenderer

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return "" if value is None else value


class CSVRenderer(BaseRenderer):
    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> str:
        view = (renderer_context or {}).get("view")
        columns: Sequence[str] = getattr(view, "csv_columns", ())
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(columns)
        for row in data or ():
            writer.writerow([_cell(row.get(name)) for name in columns])
        return buffer.getvalue()
