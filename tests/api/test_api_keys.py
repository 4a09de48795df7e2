"""API key management over REST: agency admins only."""

from __future__ import annotations

import pytest

from core.models import Role
from core.models.api_keys import ApiKey
from tests.api.conftest import count, fields_of

URL = "/api/v1/api-keys/"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "name"),
        ({"name": "x", "role": "owner"}, "role"),
        ({"name": "x", "prefix": "abcdabcd"}, "prefix"),
        ({"name": "x" * 201}, "name"),
    ],
)
def test_bad_input_creates_no_key(tenant_a, as_role, body, field) -> None:
    assert field in fields_of(as_role(Role.ADMIN).post(URL, body, format="json"))
    assert count(ApiKey) == 0


def test_key_with_a_role(tenant_a, as_role) -> None:
    created = as_role(Role.ADMIN).post(
        URL, {"name": "Approver bot", "role": "approver"}, format="json"
    )
    assert created.status_code == 201
    assert created.json()["role"] == Role.APPROVER
    assert as_role(Role.ADMIN).get(URL, {"role": "approver"}).json()["count"] == 1
    assert as_role(Role.ADMIN).get(URL, {"revoked": "true"}).json()["count"] == 0


@pytest.mark.parametrize("role", [Role.STAFF, Role.APPROVER, Role.VIEWER])
def test_only_admins_manage_keys(tenant_a, as_role, role) -> None:
    client = as_role(role)
    assert client.get(URL).status_code == 403
    assert client.post(URL, {"name": "mine"}, format="json").status_code == 403
    created = as_role(Role.ADMIN).post(URL, {"name": "admin's"}, format="json").json()
    assert client.post(f"{URL}{created['id']}/revoke/").status_code == 403
    assert count(ApiKey, revoked_at__isnull=True) == 1


def test_staff_of_another_agency_cannot_see_keys(tenant_a, tenant_b, as_role) -> None:
    from tests.api.conftest import token_client

    created = as_role(Role.ADMIN).post(URL, {"name": "A's"}, format="json").json()
    other_admin = token_client(tenant_b.users[Role.ADMIN])
    assert other_admin.get(URL).json()["count"] == 0
    assert other_admin.get(f"{URL}{created['id']}/").status_code == 404
    assert other_admin.post(f"{URL}{created['id']}/revoke/").status_code == 404
    assert count(ApiKey, revoked_at__isnull=True) == 1
