"""Reads of datasets and results: under the caller's agency (row-level security), by-id access
alike for "missing" and "another agency's"."""

from __future__ import annotations

import uuid

from django.db.models import QuerySet

from core.models import Agency
from core.selectors import access_object
from datasets.models import Dataset, DatasetChart, DatasetResult

# Everything but the bytes: lists and schemas never read a dataset's rows.
LIST_FIELDS = (
    "id",
    "agency_id",
    "name",
    "title",
    "description",
    "source",
    "file_format",
    "original_name",
    "size_bytes",
    "row_count",
    "columns",
    "query",
    "created_at",
    "updated_at",
)


def dataset_list(*, agency_id: uuid.UUID) -> QuerySet[Dataset]:
    return Dataset.objects.filter(agency_id=agency_id).only(*LIST_FIELDS).order_by("name")


def dataset_by_names(*, agency_id: uuid.UUID, names: list[str]) -> list[Dataset]:
    """The named datasets with their bytes (what a query reads)."""
    return list(Dataset.objects.filter(agency_id=agency_id, name__in=names).order_by("name"))


def access_dataset(*, agency: Agency | None, id: uuid.UUID | str) -> Dataset:
    return access_object(Dataset.objects.defer("data"), agency=agency, id=id)


def access_result(*, agency: Agency | None, id: uuid.UUID | str) -> DatasetResult:
    return access_object(DatasetResult.objects.all(), agency=agency, id=id)


def results_of_run(*, execution_id: uuid.UUID) -> QuerySet[DatasetResult]:
    return DatasetResult.objects.filter(execution_id=execution_id).defer("csv")


def charts_of_run(*, execution_id: uuid.UUID) -> QuerySet[DatasetChart]:
    """A run's charts, without their bytes (the run page links each image)."""
    return (
        DatasetChart.objects.filter(execution_id=execution_id)
        .defer("png")
        .order_by("created_at", "position")
    )


def chart_of_run(*, execution_id: uuid.UUID, chart_id: uuid.UUID) -> DatasetChart | None:
    """One chart of the run with its bytes (under the caller's agency: another's is None)."""
    return DatasetChart.objects.filter(execution_id=execution_id, pk=chart_id).first()
