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
from crm.models import ContactStatus
from datasets.models import Dataset
from tests.admin.conftest import member
from tests.admin.helpers import admin_url
from tests.crm.factories import ContactFactory
from tests.datasets.factories import AnalysisDatasetFactory, DatasetResultFactory
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


# --- A CRM query registered in the admin ------------------------------------------------------


def _crm_add_url() -> str:
    return admin_url(Dataset, "add") + "?source=crm_query"


def _crm_form(**changes: str) -> dict[str, str]:
    return {
        "name": "customers",
        "title": "Customers",
        "description": "Contacts who bought",
        "entity_type": "contacts",
        "filters": "status eq customer\n",
        "crm_fields": "first_name, company",
    } | changes


def test_staff_register_a_crm_query_as_a_dataset_with_its_schema_inferred(
    agency: Agency, staff_client: Client
) -> None:
    ContactFactory.create(agency=agency, status=ContactStatus.CUSTOMER, company="Acme")
    ContactFactory.create(agency=agency, status=ContactStatus.CUSTOMER, company="Initech")
    ContactFactory.create(agency=agency, status=ContactStatus.LEAD)
    listing = staff_client.get(admin_url(Dataset, "changelist")).content.decode()
    assert "Register a CRM query" in listing
    form = staff_client.get(_crm_add_url()).content.decode()
    assert 'name="entity_type"' in form
    assert 'name="file"' not in form

    added = staff_client.post(_crm_add_url(), _crm_form())

    assert added.status_code == 302, added.content.decode()[:3000]
    (dataset,) = _datasets(agency)
    assert (dataset.source, dataset.file_format, dataset.title) == (
        "crm_query",
        "crm",
        "Customers",
    )
    assert dataset.query == {
        "entity_type": "contacts",
        "filters": {"status": {"eq": "customer"}},
        "fields": ["first_name", "company"],
    }
    assert [c["name"] for c in dataset.columns] == ["first_name", "company"]
    assert dataset.row_count == 2
    assert sorted(dataset.columns[1]["samples"]) == ["Acme", "Initech"]
    page = staff_client.get(admin_url(Dataset, "change", dataset.pk)).content.decode()
    assert "customer" in page  # its query, shown read-only


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"name": "Customers"}, "This value does not match the required pattern."),
        ({"crm_fields": "first_name, password"}, "password not allowed"),
        ({"filters": "status gt customer"}, "Operator &#x27;gt&#x27; is not allowed on status"),
        ({"filters": "\nstatus wobbles customer"}, "Line 2: op: &quot;wobbles&quot; is not a"),
        ({"filters": "status"}, "Line 1: write &#x27;field operator value&#x27;."),
        ({"filters": "secret eq 1"}, "secret"),
        ({"entity_type": "users"}, "Select a valid choice."),
    ],
)
def test_a_crm_query_the_api_would_refuse_is_a_form_error_and_keeps_nothing(
    agency: Agency, staff_client: Client, changes: dict[str, str], message: str
) -> None:
    page = staff_client.post(_crm_add_url(), _crm_form(**changes))

    assert page.status_code == 200
    assert message in page.content.decode()
    assert _datasets(agency) == []


def test_a_crm_query_under_a_name_in_use_is_a_form_error(
    agency: Agency, staff_client: Client
) -> None:
    AnalysisDatasetFactory.create(agency=agency, name="customers")

    page = staff_client.post(_crm_add_url(), _crm_form())

    assert page.status_code == 200
    assert "already exists" in page.content.decode()
    assert [d.source for d in _datasets(agency)] == ["upload"]
