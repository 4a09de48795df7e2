"""Datasets over the API: uploads of each format with their inferred schema, bad files refused
that keep nothing, descriptions, deletion, another agency's datasets out of reach, and a table
result downloaded whole."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings

from core import tenancy
from datasets.models import Dataset
from tests.api.conftest import Tenant, token_client
from tests.datasets.files import SALES_CSV, SALES_XLSX_ROWS, parquet, xlsx

pytestmark = pytest.mark.django_db
URL = "/api/v1/analysis/datasets/"


def _upload(client: Any, name: str, file_name: str, content: bytes, **extra: str) -> Any:
    return client.post(
        URL,
        {"name": name, "file": SimpleUploadedFile(file_name, content), **extra},
        format="multipart",
    )


def _count(tenant: Tenant) -> int:
    with tenancy.agency_context(tenant.agency.id):
        return Dataset.objects.count()


@pytest.mark.parametrize(
    ("file_name", "content", "columns", "types", "rows"),
    [
        pytest.param(
            "sales.csv", SALES_CSV, ["region", "amount", "order_date", "status"],
            ["VARCHAR", "DOUBLE", "DATE", "VARCHAR"], 4, id="csv",
        ),
        pytest.param(
            "sales.xlsx", xlsx(SALES_XLSX_ROWS), ["region", "amount", "order_date"],
            ["VARCHAR", "DOUBLE", "DATE"], 3, id="xlsx",
        ),
        pytest.param(
            "items.parquet", parquet(), ["id", "label"], ["BIGINT", "VARCHAR"], 12, id="parquet",
        ),
    ],
)  # fmt: skip
def test_an_upload_of_each_format_gets_its_schema(  # noqa: PLR0917 - the parameters
    tenant_a: Tenant,
    as_role: Any,
    file_name: str,
    content: bytes,
    columns: list[str],
    types: list[str],
    rows: int,
) -> None:
    response = _upload(as_role("staff"), "sales", file_name, content)

    assert response.status_code == 201, response.content
    body = response.json()
    assert [c["name"] for c in body["columns"]] == columns
    assert [c["type"] for c in body["columns"]] == types
    assert body["row_count"] == rows
    assert body["table"] == "datasets.sales"
    assert all(c["samples"] for c in body["columns"])
    assert body["size_bytes"] == len(content)


@pytest.mark.parametrize(
    ("file_name", "content", "extra", "code"),
    [
        # DRF's own check: "The submitted file is empty."
        pytest.param("x.csv", b"", {}, "invalid", id="empty"),
        pytest.param("x.parquet", b"not parquet at all", {}, "invalid_file", id="not-parquet"),
        pytest.param("x.xlsx", b"PK\x03\x04broken zip", {}, "invalid_file", id="broken-xlsx"),
        pytest.param("x.xlsx", b"a,b\n1,2\n", {}, "invalid_file", id="csv-named-xlsx"),
        pytest.param("x.json", b"{}", {}, "invalid_format", id="unknown-extension"),
        pytest.param("x.csv", SALES_CSV, {"name": "Bad Name"}, "invalid", id="bad-name"),
    ],
)
def test_a_bad_file_is_refused_with_why_and_keeps_nothing(  # noqa: PLR0917 - parameters
    tenant_a: Tenant, as_role: Any, file_name: str, content: bytes, extra: dict[str, str], code: str
) -> None:
    client = as_role("staff")
    response = client.post(
        URL,
        {"name": "data", "file": SimpleUploadedFile(file_name, content), **extra},
        format="multipart",
    )

    # 400 when the request does not match the schema, 422 when the file breaks a rule it cannot
    # state (README "REST API": errors).
    assert response.status_code == (400 if code == "invalid" else 422), response.content
    assert response.json()["code"] == code
    assert response.json()["message"]
    assert _count(tenant_a) == 0


@override_settings(AGENTDESK_DATASET_MAX_UPLOAD_BYTES=50)
def test_a_file_past_the_size_limit_is_refused(tenant_a: Tenant, as_role: Any) -> None:
    response = _upload(as_role("staff"), "sales", "sales.csv", SALES_CSV)

    assert response.status_code == 422
    assert response.json()["code"] == "file_too_large"
    assert "AGENTDESK_DATASET_MAX_UPLOAD_BYTES" in response.json()["message"]
    assert _count(tenant_a) == 0


@override_settings(AGENTDESK_DATASET_MAX_ROWS=3)
def test_a_file_past_the_row_limit_is_refused(tenant_a: Tenant, as_role: Any) -> None:
    response = _upload(as_role("staff"), "sales", "sales.csv", SALES_CSV)

    assert response.status_code == 422
    assert response.json()["code"] == "too_many_rows"


def test_a_name_taken_is_a_409(tenant_a: Tenant, as_role: Any) -> None:
    client = as_role("staff")
    assert _upload(client, "sales", "sales.csv", SALES_CSV).status_code == 201

    response = _upload(client, "sales", "sales.csv", SALES_CSV)

    assert response.status_code == 409
    assert response.json()["code"] == "name_taken"
    assert _count(tenant_a) == 1


def test_staff_describe_columns_and_an_unknown_column_changes_nothing(
    tenant_a: Tenant, as_role: Any
) -> None:
    client = as_role("staff")
    dataset = _upload(client, "sales", "sales.csv", SALES_CSV).json()
    url = f"{URL}{dataset['id']}/"

    changed = client.patch(
        url,
        {"columns": [{"name": "amount", "description": "Order value in EUR, VAT included"}]},
        format="json",
    )
    refused = client.patch(
        url, {"columns": [{"name": "colour", "description": "x"}], "title": "Never"}, format="json"
    )

    assert changed.status_code == 200
    described = {c["name"]: c["description"] for c in changed.json()["columns"]}
    assert described["amount"] == "Order value in EUR, VAT included"
    assert refused.status_code == 422
    assert refused.json()["code"] == "unknown_column"
    assert client.get(url).json()["title"] == ""


def test_deleting_a_dataset_deletes_its_data(tenant_a: Tenant, as_role: Any) -> None:
    client = as_role("staff")
    dataset = _upload(client, "sales", "sales.csv", SALES_CSV).json()

    response = client.delete(f"{URL}{dataset['id']}/")

    assert response.status_code == 204
    assert _count(tenant_a) == 0
    assert client.get(f"{URL}{dataset['id']}/").status_code == 404


def test_viewers_read_but_do_not_upload(tenant_a: Tenant, as_role: Any) -> None:
    assert _upload(as_role("staff"), "sales", "s.csv", SALES_CSV).status_code == 201
    viewer = as_role("viewer")

    assert viewer.get(URL).json()["count"] == 1
    assert _upload(viewer, "more", "s.csv", SALES_CSV).status_code == 403


def test_another_agency_sees_none_of_it(tenant_a: Tenant, tenant_b: Tenant, as_role: Any) -> None:
    dataset = _upload(as_role("staff"), "sales", "s.csv", SALES_CSV).json()
    other = token_client(tenant_b.users["admin"])

    assert other.get(URL).json()["count"] == 0
    assert other.get(f"{URL}{dataset['id']}/").status_code == 404
    assert other.delete(f"{URL}{dataset['id']}/").status_code == 404
    assert _count(tenant_a) == 1


def test_a_crm_query_is_registered_and_a_bad_one_is_refused(tenant_a: Tenant, as_role: Any) -> None:
    client = as_role("staff")

    created = client.post(
        f"{URL}crm-query/",
        {
            "name": "leads",
            "query": {
                "entity_type": "contacts",
                "filters": [{"field": "status", "op": "eq", "value": "lead"}],
            },
        },
        format="json",
    )
    refused = client.post(
        f"{URL}crm-query/",
        {
            "name": "x",
            "query": {
                "entity_type": "contacts",
                "filters": [{"field": "colour", "op": "eq", "value": "red"}],
            },
        },
        format="json",
    )

    assert created.status_code == 201, created.content
    assert created.json()["source"] == "crm_query"
    assert "first_name" in [c["name"] for c in created.json()["columns"]]
    assert refused.status_code == 422
    assert refused.json()["code"] == "invalid_query"


def test_a_result_downloads_whole_as_csv_for_its_agency_only(
    tenant_a: Tenant, tenant_b: Tenant, as_role: Any
) -> None:
    from datasets.models import DatasetResult
    from tests.agents.factories import ExecutionFactory

    execution = ExecutionFactory.create(agent__agency=tenant_a.agency)
    with tenancy.agency_context(tenant_a.agency.id):
        result = DatasetResult.objects.create(
            agency=tenant_a.agency,
            execution=execution,
            tool_call_id="call_1",
            tool_name="execute_sql",
            sql="SELECT 1",
            columns=[{"name": "a", "type": "INTEGER"}],
            row_count=1,
            csv=b"a\n1\n",
        )
    url = f"/api/v1/analysis/results/{result.id}/download/"

    response = as_role("viewer").get(url)

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert list(csv.reader(io.StringIO(response.content.decode()))) == [["a"], ["1"]]
    assert token_client(tenant_b.users["admin"]).get(url).status_code == 404
