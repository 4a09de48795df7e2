"""Authentication: API keys (shown once, stored hashed, revocable, one agency), user tokens,
admin sessions with CSRF, superusers, and the tenant never taken from request input."""

from __future__ import annotations

import hashlib
import secrets

import pytest
from django.db import connection
from rest_framework.test import APIClient

from core import tenancy
from core.models import Role
from core.models.api_keys import ApiKey, hash_secret
from core.tokens import BASE58
from tests.agents.factories import AgentFactory, ExecutionFactory
from tests.api.conftest import count, key_client, new_key, token_client

AGENTS = "/api/v1/agents/"
KEYS = "/api/v1/api-keys/"


def _bearer(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def test_no_credential_is_401_with_a_challenge(db) -> None:
    response = APIClient().get(AGENTS)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert response.json()["code"] == "not_authenticated"


def test_api_key_is_shown_once_and_stored_hashed(tenant_a, as_role) -> None:
    created = as_role(Role.ADMIN).post(KEYS, {"name": "CRM sync"}, format="json")
    assert created.status_code == 201
    full_key = created.json()["key"]
    prefix, secret = full_key.split("_", 2)[1:]
    assert full_key.startswith(f"adk_{created.json()['prefix']}_")
    listed = as_role(Role.ADMIN).get(KEYS).json()["results"]
    assert [k["prefix"] for k in listed] == [prefix]
    assert "key" not in listed[0]
    assert "key" not in as_role(Role.ADMIN).get(f"{KEYS}{listed[0]['id']}/").json()
    with tenancy.platform_context(), connection.cursor() as cursor:
        cursor.execute("SELECT row_to_json(k)::text, secret_hash FROM core_apikey k")
        ((row, stored_hash),) = cursor.fetchall()
    assert secret not in row
    assert full_key not in row
    assert stored_hash == hashlib.sha256(secret.encode()).hexdigest()
    # ... and the key works, as a staff member of its agency (the default role).
    assert _bearer(full_key).get(AGENTS).status_code == 200


def test_a_new_keys_secret_is_base58_and_keys_made_before_stay_valid(tenant_a) -> None:
    full_key = new_key(tenant_a.agency)
    secret = full_key.split("_", 2)[2]
    assert len(secret) == 44
    assert set(secret) <= set(BASE58), secret  # no 0 O I l to misread, no - or _ to stop a click
    # A key made before, with token_urlsafe's letters (l and I, - and _), still authenticates.
    old_secret = "lI0O-_" + secrets.token_urlsafe(32)
    with tenancy.agency_context(tenant_a.agency.id):
        ApiKey.objects.create(
            agency=tenant_a.agency, name="old", role=Role.STAFF, prefix="0ld0ld00",
            secret_hash=hash_secret(old_secret),
        )  # fmt: skip
    assert _bearer(f"adk_0ld0ld00_{old_secret}").get(AGENTS).status_code == 200


def test_api_key_sees_only_its_agency(tenant_a, tenant_b) -> None:
    mine = AgentFactory.create(agency=tenant_a.agency, site=tenant_a.site)
    theirs = AgentFactory.create(agency=tenant_b.agency, site=tenant_b.site)
    theirs_run = ExecutionFactory.create(agent=theirs)
    client = key_client(tenant_a.agency, Role.ADMIN)
    assert [a["id"] for a in client.get(AGENTS).json()["results"]] == [str(mine.id)]
    assert client.get(f"{AGENTS}{theirs.id}/").status_code == 404
    assert client.get(f"/api/v1/executions/{theirs_run.id}/").status_code == 404
    assert client.get("/api/v1/executions/").json()["count"] == 0
    with tenancy.agency_context(tenant_b.agency.id):
        b_key = ApiKey.objects.create(
            agency=tenant_b.agency, name="b", prefix="bbbbbbbb", secret_hash="0" * 64
        )
    assert client.get(f"{KEYS}{b_key.id}/").status_code == 404
    assert client.post(f"{KEYS}{b_key.id}/revoke/").status_code == 404
    assert [k["name"] for k in client.get(KEYS).json()["results"]] == ["admin key"]
    # The tenant never comes from input: ?agency= means nothing for a key.
    other = client.get(AGENTS, {"agency": str(tenant_b.agency.id)})
    assert [a["id"] for a in other.json()["results"]] == [str(mine.id)]


def test_revoked_key_is_refused(tenant_a, as_role) -> None:
    created = as_role(Role.ADMIN).post(KEYS, {"name": "temp", "role": "viewer"}, format="json")
    key = created.json()["key"]
    assert _bearer(key).get(AGENTS).status_code == 200
    revoked = as_role(Role.ADMIN).post(f"{KEYS}{created.json()['id']}/revoke/")
    assert revoked.status_code == 200
    assert revoked.json()["revoked_at"] is not None
    response = _bearer(key).get(AGENTS)
    assert response.status_code == 401
    assert "revoked" in response.json()["message"]


@pytest.mark.parametrize(
    "credential",
    [
        "adk_00000000_wrongsecret",
        "adk_short_x",
        "not-a-key",
        "adk_",
    ],
)
def test_unknown_or_malformed_keys_are_401(tenant_a, credential) -> None:
    assert _bearer(credential).get(AGENTS).status_code == 401


def test_a_right_prefix_with_a_wrong_secret_is_refused(tenant_a) -> None:
    real = new_key(tenant_a.agency)
    assert _bearer(real).get(AGENTS).status_code == 200
    forged = real[: len("adk_12345678_")] + "A" * 43
    assert _bearer(forged).get(AGENTS).status_code == 401


def test_key_of_an_inactive_agency_is_refused(tenant_a) -> None:
    client = key_client(tenant_a.agency)
    with tenancy.platform_context():
        type(tenant_a.agency).objects.filter(pk=tenant_a.agency.pk).update(is_active=False)
    assert client.get(AGENTS).status_code == 401


def test_key_role_limits_what_it_may_do(tenant_a) -> None:
    viewer = key_client(tenant_a.agency, Role.VIEWER)
    assert viewer.get(AGENTS).status_code == 200
    assert viewer.post(AGENTS, {}, format="json").status_code == 403
    assert key_client(tenant_a.agency, Role.STAFF).get(KEYS).status_code == 403


def test_key_use_is_recorded(tenant_a) -> None:
    client = key_client(tenant_a.agency)
    client.get(AGENTS)
    with tenancy.agency_context(tenant_a.agency.id):
        assert ApiKey.objects.get().last_used_at is not None


def test_user_token_acts_in_the_members_agency(tenant_a, tenant_b) -> None:
    AgentFactory.create(agency=tenant_b.agency, site=tenant_b.site)
    mine = AgentFactory.create(agency=tenant_a.agency, site=tenant_a.site)
    results = token_client(tenant_a.users[Role.VIEWER]).get(AGENTS).json()["results"]
    assert [a["id"] for a in results] == [str(mine.id)]
    bad = APIClient()
    bad.credentials(HTTP_AUTHORIZATION="Token nope")
    assert bad.get(AGENTS).status_code == 401


def test_session_login_works_and_enforces_csrf(tenant_a) -> None:
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(tenant_a.users[Role.STAFF])
    assert client.get(AGENTS).status_code == 200
    body = {"site": str(tenant_a.site.id), "name": "x", "agent_type": "assistant"}
    response = client.post(AGENTS, {**body, "system_prompt": "y"}, format="json")
    assert response.status_code == 403
    assert "CSRF" in response.json()["message"]
    from agents.models import Agent

    assert count(Agent) == 0


def test_superuser_reads_all_agencies_and_writes_for_a_named_one(
    tenant_a, tenant_b, superuser
) -> None:
    AgentFactory.create(agency=tenant_a.agency, site=tenant_a.site)
    AgentFactory.create(agency=tenant_b.agency, site=tenant_b.site)
    client = token_client(superuser)
    assert client.get(AGENTS).json()["count"] == 2
    assert client.get(AGENTS, {"agency": str(tenant_b.agency.id)}).json()["count"] == 1
    body = {"site": str(tenant_b.site.id), "name": "By root", "agent_type": "assistant"}
    body["system_prompt"] = "Help."
    refused = client.post(AGENTS, body, format="json")
    assert refused.status_code == 400
    assert refused.json()["code"] == "agency_required"
    created = client.post(f"{AGENTS}?agency={tenant_b.agency.id}", body, format="json")
    assert created.status_code == 201
    # The named agency is the tenant: agency A's site does not exist there.
    wrong_site = {**body, "site": str(tenant_a.site.id), "name": "Other"}
    response = client.post(f"{AGENTS}?agency={tenant_b.agency.id}", wrong_site, format="json")
    assert response.status_code == 422  # a well-formed id, of no site of the named agency
    assert client.get(AGENTS, {"agency": "nope"}).status_code == 400


def test_staff_of_one_agency_see_nothing_of_another(tenant_a, tenant_b) -> None:
    theirs = AgentFactory.create(agency=tenant_b.agency, site=tenant_b.site)
    their_run = ExecutionFactory.create(agent=theirs)
    new_key(tenant_b.agency)
    staff_a = token_client(tenant_a.users[Role.STAFF])
    assert staff_a.get(AGENTS).json()["count"] == 0
    assert staff_a.get("/api/v1/executions/").json()["count"] == 0
    assert staff_a.get(f"/api/v1/executions/{their_run.id}/").status_code == 404
    assert staff_a.get(f"{AGENTS}{theirs.id}/executions/").status_code == 404
    assert staff_a.get(KEYS).status_code == 403  # keys are for agency admins
    admin_a = token_client(tenant_a.users[Role.ADMIN])
    assert admin_a.get(KEYS).json()["count"] == 0
