"""Datasets made through the service, as staff make them."""

from __future__ import annotations

from core import tenancy
from core.models import Agency
from datasets.models import Dataset
from datasets.services import dataset_upload
from tests.datasets.files import SALES_CSV


def upload(
    agency: Agency, name: str = "sales", content: bytes = SALES_CSV, file_name: str = "sales.csv"
) -> Dataset:
    with tenancy.agency_context(agency.id):
        return dataset_upload(agency=agency, name=name, file_name=file_name, content=content)
