"""``manage.py api_keys`` (create, list, revoke) and key expiry: an expired key is refused like a
revoked one; the last use is recorded at most once a minute."""

from __future__ import annotations

import datetime
import io
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from rest_framework.test import APIClient

from core import tenancy
from core.api_keys.services import api_key_create
from core.exceptions import ApplicationError
from core.models import Role
from core.models.api_keys import ApiKey
from tests.api.conftest import count

AGENTS = "/api/v1/agents/"


def run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("api_keys", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def bearer(full_key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {full_key}")
    return client


def key_row(**filters: Any) -> ApiKey:
    with tenancy.platform_context():
        return ApiKey.objects.get(**filters)


def test_create_prints_the_key_once_and_it_works(tenant_a) -> None:
    out, err = run("create", "--agency", tenant_a.agency.slug, "--name", "CI", "--role", "viewer")
    full_key = out.strip()
    assert full_key.startswith("adk_")
    assert "\n" not in full_key
    row = key_row(agency=tenant_a.agency)
    assert (row.name, row.role, row.expires_at) == ("CI", Role.VIEWER, None)
    assert row.prefix in err
    assert "never expires" in err
    assert "not be shown again" in err
    assert full_key not in err
    assert bearer(full_key).get(AGENTS).status_code == 200
    assert bearer(full_key).post(AGENTS, {}, format="json").status_code == 403  # a viewer


def test_create_with_an_expiry(tenant_a) -> None:
    out, _err = run(
        "create", "--agency", tenant_a.agency.slug, "--name", "Temp", "--expires-in-days", "7"
    )
    row = key_row(agency=tenant_a.agency)
    expected = timezone.now() + datetime.timedelta(days=7)
    assert row.expires_at is not None
    assert abs(row.expires_at - expected) < datetime.timedelta(minutes=1)
    assert row.role == Role.STAFF
    assert bearer(out.strip()).get(AGENTS).status_code == 200


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--agency", "no-such-agency", "--name", "x"], "No agency"),
        (["--name", "   "], "needs a name"),
        (["--name", "x" * 201], "too long"),
        (["--name", "x", "--expires-in-days", "0"], "between 1 and"),
        (["--name", "x", "--expires-in-days", "-3"], "between 1 and"),
        (["--name", "x", "--expires-in-days", "100000"], "between 1 and"),
    ],
)
def test_create_with_bad_input_creates_nothing(tenant_a, args, message) -> None:
    if "--agency" not in args:
        args = ["--agency", tenant_a.agency.slug, *args]
    with pytest.raises(CommandError, match=message):
        run("create", *args)
    assert count(ApiKey) == 0


def test_an_unknown_role_is_refused_by_the_parser(tenant_a) -> None:
    with pytest.raises(CommandError, match="invalid choice"):
        run("create", "--agency", tenant_a.agency.slug, "--name", "x", "--role", "owner")
    assert count(ApiKey) == 0


def test_list_shows_the_agencys_keys_and_their_status_never_a_secret(tenant_a, tenant_b) -> None:
    active, _ = run("create", "--agency", tenant_a.agency.slug, "--name", "Active")
    revoked, _ = run("create", "--agency", tenant_a.agency.slug, "--name", "Old")
    run("revoke", key_row(name="Old").prefix)
    run("create", "--agency", tenant_b.agency.slug, "--name", "Other agency's")
    with tenancy.agency_context(tenant_a.agency.id):
        ApiKey.objects.filter(name="Active").update(
            expires_at=timezone.now() + datetime.timedelta(days=3)
        )
    out, _ = run("list", "--agency", tenant_a.agency.slug)
    lines = out.strip().splitlines()
    assert lines[0].split()[:4] == ["PREFIX", "NAME", "ROLE", "STATUS"]
    assert len(lines) == 3
    assert "Other agency's" not in out
    assert active.strip() not in out
    assert revoked.strip().split("_", 2)[2] not in out
    by_name = {line.split()[1]: line for line in lines[1:]}
    assert " revoked " in by_name["Old"]
    assert " active " in by_name["Active"]
    assert (timezone.now() + datetime.timedelta(days=3)).strftime("%Y-%m-%d") in by_name["Active"]


def test_list_of_an_agency_without_keys(tenant_a) -> None:
    out, _ = run("list", "--agency", tenant_a.agency.slug)
    assert "has no API keys" in out


@pytest.mark.parametrize("ref", ["prefix", "id", "full"])
def test_revoke_by_prefix_or_id(tenant_a, ref) -> None:
    full_key = run("create", "--agency", tenant_a.agency.slug, "--name", "Bot")[0].strip()
    row = key_row(name="Bot")
    given = {"prefix": row.prefix, "id": str(row.pk), "full": full_key}[ref]
    out, _ = run("revoke", given)
    assert f"Revoked API key {row.prefix}" in out
    assert key_row(name="Bot").revoked_at is not None
    response = bearer(full_key).get(AGENTS)
    assert response.status_code == 401
    assert response.json()["message"] == "This API key has been revoked."
    again, _ = run("revoke", row.prefix)
    assert "already revoked" in again


def test_revoke_of_an_unknown_key(db) -> None:
    with pytest.raises(CommandError, match="No API key"):
        run("revoke", "deadbeef")


# --- expiry --------------------------------------------------------------------------------


def test_an_expired_key_is_refused_like_a_revoked_one(tenant_a) -> None:
    with tenancy.agency_context(tenant_a.agency.id):
        key, full_key = api_key_create(
            agency_id=tenant_a.agency.id,
            name="Short-lived",
            expires_at=timezone.now() + datetime.timedelta(hours=1),
        )
    assert bearer(full_key).get(AGENTS).status_code == 200
    with tenancy.agency_context(tenant_a.agency.id):
        ApiKey.objects.filter(pk=key.pk).update(expires_at=timezone.now())
    response = bearer(full_key).get(AGENTS)
    assert response.status_code == 401
    body = response.json()
    assert body == {"message": "This API key has expired.", "code": "authentication_failed",
                    "extra": {}}  # fmt: skip
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    "expires_at",
    [
        lambda: timezone.now() - datetime.timedelta(seconds=1),
        lambda: datetime.datetime(2100, 1, 1),  # noqa: DTZ001 - naive on purpose
    ],
)
def test_a_key_cannot_be_created_already_expired_or_with_a_naive_time(tenant_a, expires_at) -> None:
    with (
        tenancy.agency_context(tenant_a.agency.id),
        pytest.raises(ApplicationError, match="future"),
    ):
        api_key_create(agency_id=tenant_a.agency.id, name="x", expires_at=expires_at())
    assert count(ApiKey) == 0


def test_last_use_is_recorded_at_most_once_a_minute(tenant_a) -> None:
    full_key = run("create", "--agency", tenant_a.agency.slug, "--name", "Bot")[0].strip()
    assert key_row(name="Bot").last_used_at is None
    bearer(full_key).get(AGENTS)
    first = key_row(name="Bot").last_used_at
    assert first is not None
    bearer(full_key).get(AGENTS)
    assert key_row(name="Bot").last_used_at == first  # within the minute: not written again
    with tenancy.agency_context(tenant_a.agency.id):
        earlier = timezone.now() - datetime.timedelta(minutes=2)
        ApiKey.objects.filter(name="Bot").update(last_used_at=earlier)
    bearer(full_key).get(AGENTS)
    touched = key_row(name="Bot").last_used_at
    assert touched is not None
    assert touched > first


# --- expiry in the API and the admin ---------------------------------------------------------


def test_the_api_creates_a_key_with_an_expiry_and_refuses_a_past_one(tenant_a) -> None:
    from tests.api.conftest import fields_of, token_client

    client = token_client(tenant_a.users[Role.ADMIN])
    when = (timezone.now() + datetime.timedelta(days=30)).replace(microsecond=0)
    created = client.post(
        "/api/v1/api-keys/", {"name": "Zapier", "expires_at": when.isoformat()}, format="json"
    )
    assert created.status_code == 201, created.json()
    assert datetime.datetime.fromisoformat(created.json()["expires_at"]) == when
    past = (timezone.now() - datetime.timedelta(days=1)).isoformat()
    refused = client.post("/api/v1/api-keys/", {"name": "Old", "expires_at": past}, format="json")
    assert "expires_at" in fields_of(refused, 422)
    assert count(ApiKey) == 1


def _admin_client(tenant: Any) -> Any:
    from django.test import Client

    client = Client()
    client.force_login(tenant.users[Role.ADMIN])
    return client


def _make_key(tenant: Any, name: str, *, days: float | None, revoked: bool = False) -> ApiKey:
    with tenancy.agency_context(tenant.agency.id):
        key, _ = api_key_create(agency_id=tenant.agency.id, name=name)
        expires = timezone.now() + datetime.timedelta(days=days) if days is not None else None
        ApiKey.objects.filter(pk=key.pk).update(
            expires_at=expires, revoked_at=timezone.now() if revoked else None
        )
    return key


def test_the_admin_shows_and_filters_keys_about_to_expire(tenant_a) -> None:
    _make_key(tenant_a, "Forever", days=None)
    _make_key(tenant_a, "Soon", days=3.5)
    _make_key(tenant_a, "Later", days=90)
    _make_key(tenant_a, "Gone", days=-1)
    _make_key(tenant_a, "Revoked", days=None, revoked=True)
    client = _admin_client(tenant_a)
    page = client.get("/admin/core/apikey/").content.decode()
    assert "Expires in 4 d" in page  # 3.5 days left, rounded up
    assert "Expired" in page
    assert "Revoked" in page

    def names(state: str) -> set[str]:
        response = client.get("/admin/core/apikey/", {"state": state})
        assert response.status_code == 200
        return {key.name for key in response.context["cl"].result_list}

    assert names("expiring") == {"Soon"}
    assert names("expired") == {"Gone"}
    assert names("revoked") == {"Revoked"}
    assert names("never") == {"Forever"}
    assert names("active") == {"Forever", "Soon", "Later"}


def test_the_admin_creates_a_key_with_an_expiry_and_refuses_a_past_one(tenant_a) -> None:
    client = _admin_client(tenant_a)
    future = timezone.localtime(timezone.now() + datetime.timedelta(days=10))
    response = client.post(
        "/admin/core/apikey/add/",
        {
            "name": "Temp",
            "role": Role.STAFF,
            "expires_at_0": future.strftime("%Y-%m-%d"),
            "expires_at_1": "12:00:00",
        },
        follow=True,
    )
    assert response.status_code == 200
    assert "copy it now" in response.content.decode()
    assert key_row(name="Temp").expires_at is not None
    past = timezone.localtime(timezone.now() - datetime.timedelta(days=1))
    refused = client.post(
        "/admin/core/apikey/add/",
        {
            "name": "Old",
            "role": Role.STAFF,
            "expires_at_0": past.strftime("%Y-%m-%d"),
            "expires_at_1": "12:00:00",
        },
    )
    assert refused.status_code == 200
    assert "must be in the future" in refused.content.decode()
    assert count(ApiKey, name="Old") == 0
