"""The datasets' writers: an upload, a CRM query registered as a dataset, the descriptions staff
edit, a deletion, and the table result and charts of a tool call. A bad file or query is a 400
naming the fault, and nothing is written (the file is read and its schema inferred before the row
is).

Preconditions for every service: in the dataset's agency context (row-level security)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from django.db import IntegrityError, transaction

from core.exceptions import ApplicationError
from core.models import Agency, User
from datasets import crm_source, ingest
from datasets.models import (
    DATASET_NAME_REGEX,
    Dataset,
    DatasetChart,
    DatasetFormat,
    DatasetResult,
    DatasetSource,
)

_NAME_HELP = "lower case letters, digits and _, starting with a letter, at most 63 characters"


def _check_name(name: str) -> str:
    import re  # noqa: PLC0415 - one use

    if not isinstance(name, str) or not re.fullmatch(DATASET_NAME_REGEX, name):
        raise ApplicationError(
            "invalid_name", f"name: {_NAME_HELP} (it is the SQL table name).", status=422
        )
    return name


def _create(agency: Agency, name: str, instance: Dataset | None = None, **fields: Any) -> Dataset:
    dataset = instance if instance is not None else Dataset()
    dataset.agency = agency
    dataset.name = name
    for field, value in fields.items():
        setattr(dataset, field, value)
    try:
        with transaction.atomic():
            dataset.save(force_insert=True)
            return dataset
    except IntegrityError as error:
        if "datasets_dataset_name_unique" in str(error):
            raise ApplicationError(
                "name_taken", f"The agency already has a dataset named {name!r}.", status=409
            ) from error
        raise


def dataset_upload(
    *,
    agency: Agency,
    name: str,
    file_name: str,
    content: bytes,
    file_format: str = "",
    title: str = "",
    description: str = "",
    created_by: User | None = None,
    ingested: ingest.Ingested | None = None,
    instance: Dataset | None = None,
) -> Dataset:
    """Read ``content`` (CSV, XLSX or Parquet), infer its schema, store it as Parquet.
    ``ingested``: the file already read (the admin's form reads it to show its faults);
    ``instance``: the unsaved row to fill (the admin's)."""
    _check_name(name)
    kind = ingest.format_of(file_name, file_format)
    read = ingested if ingested is not None else ingest.ingest(content, kind)
    return _create(
        agency,
        name,
        instance,
        title=title[:200],
        description=description,
        source=DatasetSource.UPLOAD,
        file_format=kind,
        original_name=file_name[:255],
        size_bytes=read.size_bytes,
        row_count=read.row_count,
        columns=read.columns,
        data=read.parquet,
        created_by=created_by,
    )


def dataset_register_query(
    *,
    agency: Agency,
    name: str,
    query: Mapping[str, Any],
    title: str = "",
    description: str = "",
    created_by: User | None = None,
    instance: Dataset | None = None,
) -> Dataset:
    """A dataset over CRM entities; its schema is inferred from the query's rows now.
    ``instance``: the unsaved row to fill (the admin's)."""
    _check_name(name)
    checked = crm_source.validate_query(query)
    columns, row_count = ingest.describe(crm_source.table(name, checked, agency.id))
    return _create(
        agency,
        name,
        instance,
        title=title[:200],
        description=description,
        source=DatasetSource.CRM_QUERY,
        file_format=DatasetFormat.CRM,
        row_count=row_count,
        columns=columns,
        query=checked,
        created_by=created_by,
    )


def dataset_update(
    *,
    dataset: Dataset,
    title: str | None = None,
    description: str | None = None,
    column_descriptions: Mapping[str, str] | None = None,
) -> Dataset:
    """Edit the title, description or columns' descriptions (they help the model map words to
    columns); an unknown column is a 400 and nothing changes."""
    fields: list[str] = []
    if title is not None:
        dataset.title = title[:200]
        fields.append("title")
    if description is not None:
        dataset.description = description
        fields.append("description")
    if column_descriptions is not None:
        names = {column["name"] for column in dataset.columns}
        unknown = sorted(set(column_descriptions) - names)
        if unknown:
            raise ApplicationError(
                "unknown_column",
                f"No column {', '.join(unknown[:10])} in dataset {dataset.name}.",
                status=422,
            )
        dataset.columns = [
            {
                **column,
                "description": str(column_descriptions.get(column["name"], column["description"]))[
                    :2000
                ],
            }
            for column in dataset.columns
        ]
        fields.append("columns")
    if fields:
        dataset.save(update_fields=[*fields, "updated_at"])
    return dataset


def dataset_delete(*, dataset: Dataset) -> None:
    """Delete the dataset and its bytes (results already made from it stay with their runs)."""
    dataset.delete()


def result_record(
    *,
    agency_id: uuid.UUID,
    execution_id: uuid.UUID,
    tool_call_id: str,
    tool_name: str,
    sql: str,
    columns: list[dict[str, str]],
    row_count: int,
    truncated: bool,
    csv: bytes,
) -> DatasetResult:
    """The table artefact of a tool call; inside the tool call's transaction (it commits with
    the call's recorded result, or not at all)."""
    return DatasetResult.objects.create(
        agency_id=agency_id,
        execution_id=execution_id,
        tool_call_id=tool_call_id[:200],
        tool_name=tool_name,
        sql=sql,
        columns=columns,
        row_count=row_count,
        truncated=truncated,
        csv=csv,
    )


def chart_record(
    *,
    agency_id: uuid.UUID,
    execution_id: uuid.UUID,
    tool_call_id: str,
    tool_name: str,
    position: int,
    width: int,
    height: int,
    png: bytes,
) -> DatasetChart:
    """A chart artefact of a tool call (a PNG datasets.charts checked); inside the tool call's
    transaction, like a table result."""
    return DatasetChart.objects.create(
        agency_id=agency_id,
        execution_id=execution_id,
        tool_call_id=tool_call_id[:200],
        tool_name=tool_name,
        position=position,
        width=width,
        height=height,
        size_bytes=len(png),
        png=png,
    )
