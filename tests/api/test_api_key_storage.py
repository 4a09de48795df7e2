"""API keys in the database and the admin: found by prefix before any tenant is set (and only
that row), created in the admin with the full key shown once, never stored in plain text."""

from __future__ import annotations

import re

from django.db import connection
from django.test import Client

from core import tenancy
from core.api_keys.selectors import api_key_for_secret
from core.models import Role
from core.models.api_keys import ApiKey, hash_secret
from tests.api.conftest import count, new_key


def _visible_prefixes() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT prefix FROM core_apikey ORDER BY prefix")
        return [row[0] for row in cursor.fetchall()]


def test_lookup_context_shows_exactly_the_named_key(tenant_a, tenant_b) -> None:
    key_a, key_b = new_key(tenant_a.agency), new_key(tenant_b.agency)
    prefix_a = key_a.split("_")[1]
    with tenancy.tenant_context():
        assert _visible_prefixes() == []  # no tenant: nothing
    with tenancy.api_key_lookup_context(prefix_a):
        assert _visible_prefixes() == [prefix_a]
        with connection.cursor() as cursor:  # the lookup policy is for reading only
            cursor.execute("UPDATE core_apikey SET name = 'x' WHERE prefix = %s", [prefix_a])
            assert cursor.rowcount == 0
    with tenancy.tenant_context():
        assert _visible_prefixes() == []  # and the setting is gone again
    assert api_key_for_secret(raw_key=key_b) is not None
    assert api_key_for_secret(raw_key=key_a[:-1] + "x") is None


def test_agency_context_sees_only_its_own_keys(tenant_a, tenant_b) -> None:
    new_key(tenant_a.agency)
    new_key(tenant_b.agency)
    with tenancy.agency_context(tenant_a.agency.id):
        assert ApiKey.objects.count() == 1


def test_agency_admin_creates_a_key_in_the_admin_and_sees_it_once(tenant_a) -> None:
    client = Client()
    client.force_login(tenant_a.users[Role.ADMIN])
    response = client.post(
        "/admin/core/apikey/add/", {"name": "Zapier", "role": Role.VIEWER}, follow=True
    )
    assert response.status_code == 200
    shown = re.findall(r"adk_[0-9a-f]{8}_[A-Za-z0-9_-]+", response.content.decode())
    assert len(shown) == 1
    prefix, secret = shown[0].split("_", 2)[1:]
    with tenancy.agency_context(tenant_a.agency.id):
        key = ApiKey.objects.get()
    assert (key.prefix, key.role, key.name) == (prefix, Role.VIEWER, "Zapier")
    assert key.secret_hash == hash_secret(secret)
    assert key.created_by_id == tenant_a.users[Role.ADMIN].pk
    page = client.get(f"/admin/core/apikey/{key.pk}/change/").content.decode()
    assert secret not in page
    assert prefix in page


def test_only_agency_admins_see_keys_in_the_admin(tenant_a) -> None:
    client = Client()
    client.force_login(tenant_a.users[Role.STAFF])
    assert client.get("/admin/core/apikey/").status_code == 403
    client.post("/admin/core/apikey/add/", {"name": "Sneaky", "role": Role.ADMIN})
    assert count(ApiKey) == 0


def test_revoke_action_in_the_admin(tenant_a) -> None:
    new_key(tenant_a.agency)
    with tenancy.agency_context(tenant_a.agency.id):
        key = ApiKey.objects.get()
    client = Client()
    client.force_login(tenant_a.users[Role.ADMIN])
    client.post(
        "/admin/core/apikey/",
        {"action": "revoke_keys", "_selected_action": [str(key.pk)]},
        follow=True,
    )
    assert count(ApiKey, pk=key.pk, revoked_at__isnull=False) == 1


def test_another_agencys_keys_are_invisible_in_the_admin(tenant_a, tenant_b) -> None:
    new_key(tenant_a.agency)
    with tenancy.agency_context(tenant_a.agency.id):
        key = ApiKey.objects.get()
    client = Client()
    client.force_login(tenant_b.users[Role.ADMIN])
    assert key.prefix not in client.get("/admin/core/apikey/").content.decode()
    assert client.get(f"/admin/core/apikey/{key.pk}/change/").status_code == 404


def test_superuser_creates_a_key_for_a_chosen_agency_in_the_admin(tenant_a, superuser) -> None:
    client = Client()
    client.force_login(superuser)
    response = client.post(
        "/admin/core/apikey/add/",
        {"agency": str(tenant_a.agency.id), "name": "Ops", "role": Role.STAFF},
        follow=True,
    )
    assert re.search(r"adk_[0-9a-f]{8}_", response.content.decode())
    assert count(ApiKey, agency=tenant_a.agency, name="Ops") == 1
