"""Datasets in the admin: staff upload a file and describe its columns; a file that cannot be
read is a form error and keeps nothing; a run's table results show on its run page with a CSV
download, for its agency only."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from core import tenancy
from core.models import Agency, Role, User
from datasets.models import Dataset
from tests.admin.conftest import member
from tests.admin.helpers import admin_url
from tests.datasets.factories import DatasetResultFactory
from tests.datasets.files import SALES_XLSX_ROWS, xlsx

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(agency: Agency, login: Callable[[User], Client]) -> Client:
    return login(member(agency, Role.STAFF))


def _datasets(agency: Agency) -> list[Dataset]:
    with tenancy.agency_context(agency.id):
        return list(Dataset.objects.all())


def test_staff_upload_a_workbook_and_describe_its_columns(
    agency: Agency, staff_client: Client
) -> None:
    added = staff_client.post(
        admin_url(Dataset, "add"),
        {"name": "sales", "title": "Sales", "description": "",
         "file": SimpleUploadedFile("sales.xlsx", xlsx(SALES_XLSX_ROWS))},
    )  # fmt: skip
    assert added.status_code == 302, added.content.decode()[:3000]
    (dataset,) = _datasets(agency)
    assert dataset.file_format == "xlsx"
    assert dataset.row_count == 3
    page = staff_client.get(admin_url(Dataset, "change", dataset.pk)).content.decode()
    assert "order_date" in page
    assert "2030-01-05" in page  # a sample value

    changed = staff_client.post(
        admin_url(Dataset, "change", dataset.pk),
        {"title": "Sales", "description": "Orders of 2030",
         "column_descriptions": "amount: EUR, VAT included\nregion: sales region"},
    )  # fmt: skip

    assert changed.status_code == 302, changed.content.decode()[:3000]
    (dataset,) = _datasets(agency)
    described = {c["name"]: c["description"] for c in dataset.columns}
    assert described == {
        "region": "sales region",
        "amount": "EUR, VAT included",
        "order_date": "",
    }
    assert dataset.description == "Orders of 2030"


def test_a_file_that_cannot_be_read_is_a_form_error(agency: Agency, staff_client: Client) -> None:
    page = staff_client.post(
        admin_url(Dataset, "add"),
        {"name": "sales", "title": "", "description": "",
         "file": SimpleUploadedFile("sales.parquet", b"no parquet here")},
    )  # fmt: skip

    assert page.status_code == 200
    assert "The file is not a Parquet file." in page.content.decode()
    assert _datasets(agency) == []


def test_the_run_page_shows_its_table_results_with_a_download(
    agency: Agency, other_agency: Agency, staff_client: Client, login: Callable[[User], Client]
) -> None:
    from agents.models import Execution
    from tests.agents.factories import ExecutionFactory

    run = ExecutionFactory.create(agent__agency=agency)
    result = DatasetResultFactory.create(
        execution=run, sql='SELECT region FROM datasets."sales"', csv=b"region\nnorth\nsouth\n"
    )

    page = staff_client.get(admin_url(Execution, "change", run.pk)).content.decode()
    download = staff_client.get(f"/admin/datasets/datasetresult/{result.pk}/download/")
    stranger = login(member(other_agency, Role.ADMIN))

    assert "Table results" in page
    assert "south" in page
    assert f"/admin/datasets/datasetresult/{result.pk}/download/" in page
    assert download.status_code == 200
    assert download.content == b"region\nnorth\nsouth\n"
    assert stranger.get(f"/admin/datasets/datasetresult/{result.pk}/download/").status_code == 404
