"""The audit log's export over the API: JSON Lines and CSV, filters, admins only, one agency's
entries only, and the export itself recorded."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from audit.services import audit_record
from core import tenancy
from core.api_keys.services import api_key_create
from core.models import Agency, Role
from tests.factories import AgencyFactory

pytestmark = pytest.mark.django_db
URL = "/api/v1/audit/entries/"


def _client(agency: Agency, role: str = Role.ADMIN) -> APIClient:
    with tenancy.agency_context(agency.pk):
        _, raw = api_key_create(agency_id=agency.pk, name=f"{role} key", role=role)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def _body(response: Any) -> str:
    return b"".join(response.streaming_content).decode()


def _jsonl(response: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in _body(response).splitlines()]


def test_an_admin_exports_its_agencys_entries_as_json_lines_and_not_anothers() -> None:
    mine, other = AgencyFactory.create(), AgencyFactory.create()
    audit_record(action="thing.done", agency_id=mine.pk, object_repr="=cmd|' /C calc'!A0")
    audit_record(action="thing.done", agency_id=other.pk, object_repr="theirs")
    client = _client(mine)
    response = client.get(URL, {"action": "thing.done"})
    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-ndjson"
    rows = _jsonl(response)
    assert [row["agency"] for row in rows] == [str(mine.pk)]
    assert rows[0]["hash"]
    assert "theirs" not in json.dumps(_jsonl(client.get(URL)))


def test_the_key_that_exports_is_the_actor_of_the_recorded_export() -> None:
    agency = AgencyFactory.create()
    client = _client(agency)
    _body(client.get(URL, {"action": "api_key."}))
    rows = _jsonl(client.get(URL, {"action": "audit.exported"}))
    assert rows[0]["actor_type"] == "api_key"
    assert rows[0]["changes"]["filters"] == [None, {"action": "api_key."}]


def test_csv_with_filters_and_formula_cells_quoted() -> None:
    agency = AgencyFactory.create()
    audit_record(action="thing.done", agency_id=agency.pk, object_type="x.y",
                 object_repr="=SUM(A1)")  # fmt: skip
    audit_record(action="thing.done", agency_id=agency.pk, object_type="x.z")
    response = _client(agency).get(URL, {"object_type": "x.y"}, HTTP_ACCEPT="text/csv")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(_body(response))))
    assert [(row["object_type"], row["object_repr"]) for row in rows] == [("x.y", "'=SUM(A1)")]
    assert _client(agency).get(URL, {"format": "csv"})["Content-Type"].startswith("text/csv")


def test_the_date_range_filters_and_a_reversed_one_is_refused() -> None:
    agency = AgencyFactory.create()
    entry = audit_record(action="thing.done", agency_id=agency.pk)
    client = _client(agency)
    at = entry.at.isoformat()
    assert _jsonl(client.get(URL, {"action": "thing.done", "until": at})) == []  # exclusive
    assert len(_jsonl(client.get(URL, {"action": "thing.done", "since": at}))) == 1
    since = "2000-01-01T00:00:00Z"
    assert len(_jsonl(client.get(URL, {"action": "thing.done", "since": since}))) == 1
    bad = client.get(URL, {"since": "2030-01-01T00:00:00Z", "until": "2020-01-01T00:00:00Z"})
    assert bad.status_code == 422  # schema-valid, but no range
    assert bad.json()["extra"]["fields"]["until"] == ["Must be after since."]
    assert client.get(URL, {"since": "yesterday"}).status_code == 400


@pytest.mark.parametrize("role", [Role.STAFF, Role.VIEWER, Role.APPROVER])
def test_only_admins_may_export(role: str) -> None:
    agency = AgencyFactory.create()
    response = _client(agency, role).get(URL)
    assert response.status_code == 403
    assert response["Content-Type"] == "application/json"


def test_no_credential_is_a_401() -> None:
    assert APIClient().get(URL).status_code == 401


def test_data_exports_of_usage_are_recorded_over_the_api_and_in_the_admin() -> None:
    from django.test import Client
    from django.urls import reverse

    from tests.factories import MembershipFactory

    membership = MembershipFactory.create(role=Role.ADMIN)
    agency = membership.agency
    client = _client(agency)
    assert client.get("/api/v1/usage/daily/", HTTP_ACCEPT="text/csv").status_code == 200
    assert client.get("/api/v1/usage/daily/").status_code == 200  # a page of JSON: no export
    browser = Client()
    browser.force_login(membership.user)
    assert browser.get(reverse("admin:usage_budget_export_csv")).status_code == 200
    rows = _jsonl(client.get(URL, {"action": "usage.exported"}))
    assert [(row["object_type"], row["actor_type"]) for row in rows] == [
        ("usage.usagedaily", "api_key"),
        ("usage.budget", "user"),
    ]
