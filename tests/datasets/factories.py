"""Rows of the datasets app (for tests that need a row, not an upload: tests/datasets/helpers)."""

from __future__ import annotations

import struct
import zlib

import factory

from datasets.models import Dataset, DatasetChart, DatasetFormat, DatasetResult, DatasetSource
from tests.agents.factories import ExecutionFactory
from tests.factories import AgencyFactory, TenantFactory


class AnalysisDatasetFactory(TenantFactory[Dataset]):
    class Meta:
        model = Dataset

    agency = factory.SubFactory(AgencyFactory)
    name = factory.Sequence(lambda n: f"table_{n}")
    source = DatasetSource.UPLOAD
    file_format = DatasetFormat.CSV
    columns = factory.LazyFunction(
        lambda: [{"name": "a", "type": "BIGINT", "samples": ["1"], "description": ""}]
    )
    row_count = 1


class DatasetResultFactory(TenantFactory[DatasetResult]):
    class Meta:
        model = DatasetResult

    execution = factory.SubFactory(ExecutionFactory)
    agency = factory.SelfAttribute("execution.agency")
    tool_call_id = "call_1"
    tool_name = "execute_sql"
    sql = 'SELECT a FROM datasets."table"'
    columns = factory.LazyFunction(lambda: [{"name": "a", "type": "BIGINT"}])
    row_count = 1
    csv = b"a\n1\n"


def png(width: int = 2, height: int = 1) -> bytes:
    """A real PNG of ``width`` x ``height`` white pixels (8-bit greyscale)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    pixels = zlib.compress(b"".join(b"\x00" + b"\xff" * width for _ in range(height)))
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


class DatasetChartFactory(TenantFactory[DatasetChart]):
    class Meta:
        model = DatasetChart

    execution = factory.SubFactory(ExecutionFactory)
    agency = factory.SelfAttribute("execution.agency")
    tool_call_id = "call_1"
    tool_name = "execute_python"
    width = 2
    height = 1
    png = factory.LazyFunction(png)
    size_bytes = factory.LazyAttribute(lambda chart: len(chart.png))
