"""Rows of the datasets app (for tests that need a row, not an upload: tests/datasets/helpers)."""

from __future__ import annotations

import factory

from datasets.models import Dataset, DatasetFormat, DatasetResult, DatasetSource
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
