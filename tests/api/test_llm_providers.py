"""LLM providers over REST: agency admins manage them, every member reads them; the API key is
write-only (stored encrypted, never in a response) and an endpoint on a private address is
refused like the HTTP client would refuse it."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection

from agents.models import LLMProvider
from core import tenancy
from core.models import Role
from tests.agents.factories import LLMProviderFactory
from tests.api.conftest import count, fields_of, key_client

URL = "/api/v1/llm-providers/"
KEY = "sk-test-0123456789-SECRETKEY-wxyz"


def _stored(provider_id: str | uuid.UUID) -> LLMProvider:
    with tenancy.platform_context():
        return LLMProvider.objects.get(pk=provider_id)


def test_admin_creates_lists_changes_and_deletes_a_provider(tenant_a, as_role) -> None:
    client = as_role(Role.ADMIN)
    body = {"provider_name": "openai", "api_key": KEY, "default_model": "gpt-4o-mini",
            "available_models": ["gpt-4o-mini"], "is_default": True}  # fmt: skip
    created = client.post(URL, body, format="json")
    assert created.status_code == 201, created.json()
    data = created.json()
    assert data["has_api_key"] is True
    assert data["api_key_hint"] == "wxyz"
    assert data["site"] is None
    assert "api_key" not in data
    provider = _stored(data["id"])
    assert provider.agency_id == tenant_a.agency.id
    assert provider.get_api_key() == KEY

    listed = client.get(URL).json()["results"]
    assert [p["id"] for p in listed] == [data["id"]]

    changed = client.patch(
        f"{URL}{data['id']}/", {"default_model": "gpt-4o", "tokens_per_minute": 1000}, format="json"
    )
    assert changed.status_code == 200, changed.json()
    assert changed.json()["default_model"] == "gpt-4o"
    assert _stored(data["id"]).get_api_key() == KEY  # omitted: the stored key is kept

    assert client.delete(f"{URL}{data['id']}/").status_code == 204
    assert count(LLMProvider, agency=tenant_a.agency) == 0


def test_the_key_is_never_in_any_response(tenant_a, as_role) -> None:
    client = as_role(Role.ADMIN)
    created = client.post(
        URL, {"provider_name": "anthropic", "api_key": KEY, "site": str(tenant_a.site.id)},
        format="json",
    )  # fmt: skip
    provider_id = created.json()["id"]
    responses = [
        created,
        client.get(URL),
        client.get(f"{URL}{provider_id}/"),
        client.patch(f"{URL}{provider_id}/", {"is_active": False}, format="json"),
        client.patch(f"{URL}{provider_id}/", {"api_key": KEY + "2"}, format="json"),
        client.get("/api/schema/?format=json"),
    ]
    for response in responses:
        assert response.status_code in (200, 201), response.content
        assert KEY.encode() not in response.content
        assert b"SECRETKEY" not in response.content
    # Encrypted at rest: the column holds no plaintext.
    with tenancy.platform_context(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT api_key_encrypted FROM agents_llmprovider WHERE id = %s", [provider_id]
        )
        (stored,) = cursor.fetchone()
    assert "SECRETKEY" not in stored
    assert _stored(provider_id).get_api_key() == KEY + "2"


def test_clearing_the_key_and_the_rules_of_the_admin_form(tenant_a, as_role) -> None:
    client = as_role(Role.ADMIN)
    provider = LLMProviderFactory.create(agency=tenant_a.agency, api_key=KEY)
    url = f"{URL}{provider.id}/"
    both = client.patch(url, {"api_key": "sk-other-key-000000", "clear_api_key": True},
                        format="json")  # fmt: skip
    assert "clear_api_key" in fields_of(both, 422)
    # Pointing a stored key at another server needs the key again (or its removal).
    moved = client.patch(url, {"api_endpoint": "https://gateway.example.com/v1"}, format="json")
    assert "endpoint or provider changed" in fields_of(moved)["api_key"][0]
    assert _stored(provider.id).api_endpoint == ""
    cleared = client.patch(
        url, {"api_endpoint": "https://gateway.example.com/v1", "clear_api_key": True},
        format="json",
    )  # fmt: skip
    assert cleared.status_code == 200, cleared.json()
    assert cleared.json()["has_api_key"] is False
    assert cleared.json()["api_key_hint"] == ""
    assert _stored(provider.id).get_api_key() is None


@pytest.mark.parametrize(
    ("endpoint", "message", "status"),
    [
        ("http://10.1.2.3:8000/v1", "private", 400),
        ("http://169.254.169.254/latest", "metadata", 400),
        ("ftp://models.example.com/", "http:// or https://", 400),
        ("not a url", "valid URL", 422),  # core.api.fields.UrlField
    ],
)
def test_endpoint_on_a_refused_address_is_refused_and_nothing_is_written(
    tenant_a, as_role, endpoint, message, status
) -> None:
    response = as_role(Role.ADMIN).post(
        URL,
        {"provider_name": "openai_compatible", "api_endpoint": endpoint, "api_key": KEY},
        format="json",
    )
    errors = fields_of(response, status)
    assert message.lower() in " ".join(errors["api_endpoint"]).lower(), errors
    assert count(LLMProvider, agency=tenant_a.agency) == 0


def test_endpoint_in_an_allowed_private_network_is_accepted(tenant_a, as_role, settings) -> None:
    settings.AGENTDESK_LLM_PRIVATE_NETWORKS = ["10.0.0.0/8"]
    response = as_role(Role.ADMIN).post(
        URL,
        {"provider_name": "openai_compatible", "api_endpoint": "http://10.1.2.3:8000/v1"},
        format="json",
    )
    assert response.status_code == 201, response.json()


def test_duplicates_are_field_errors(tenant_a, as_role) -> None:
    client = as_role(Role.ADMIN)
    LLMProviderFactory.create(agency=tenant_a.agency, provider_name="openai", is_default=True)
    again = client.post(URL, {"provider_name": "openai"}, format="json")
    assert "provider_name" in fields_of(again, 409)
    second_default = client.post(
        URL, {"provider_name": "anthropic", "is_default": True}, format="json"
    )
    assert "is_default" in fields_of(second_default, 409)
    unknown = client.post(URL, {"provider_name": "openai", "api_key_encrypted": "x"},
                          format="json")  # fmt: skip
    assert fields_of(unknown)["api_key_encrypted"] == ["Unknown field."]
    assert count(LLMProvider, agency=tenant_a.agency) == 1


def test_another_agencys_site_and_provider_are_not_found(tenant_a, tenant_b, as_role) -> None:
    client = as_role(Role.ADMIN)
    theirs = LLMProviderFactory.create(agency=tenant_b.agency, api_key=KEY)
    assert client.get(f"{URL}{theirs.id}/").status_code == 404
    assert (
        client.patch(f"{URL}{theirs.id}/", {"is_active": False}, format="json").status_code == 404
    )
    assert client.delete(f"{URL}{theirs.id}/").status_code == 404
    assert client.get(URL).json()["results"] == []
    wrong_site = client.post(
        URL, {"provider_name": "openai", "site": str(tenant_b.site.id)}, format="json"
    )
    assert "site" in fields_of(wrong_site, 422)
    assert _stored(theirs.id).is_active is True


@pytest.mark.parametrize("role", [Role.STAFF, Role.APPROVER, Role.VIEWER])
def test_only_agency_admins_write_providers(tenant_a, as_role, role) -> None:
    provider = LLMProviderFactory.create(agency=tenant_a.agency)
    client = as_role(role)
    assert client.get(f"{URL}{provider.id}/").status_code == 200
    assert client.post(URL, {"provider_name": "anthropic"}, format="json").status_code == 403
    assert client.patch(f"{URL}{provider.id}/", {}, format="json").status_code == 403
    assert client.delete(f"{URL}{provider.id}/").status_code == 403
    assert count(LLMProvider, agency=tenant_a.agency) == 1


def test_an_admin_api_key_manages_providers(tenant_a) -> None:
    client = key_client(tenant_a.agency, Role.ADMIN)
    assert client.post(URL, {"provider_name": "google"}, format="json").status_code == 201
