"""The LLM provider's API key is write-only in the admin: stored encrypted, never displayed."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.test import Client

from agents.models import LLMProvider
from core import tenancy
from core.models import Agency, Role, User
from tests.admin.conftest import member
from tests.admin.helpers import admin_url, change_url
from tests.admin.rows import RAW_API_KEY
from tests.agents.factories import LLMProviderFactory

pytestmark = pytest.mark.django_db

NEW_KEY = "sk-new-SECRET-key-9876543210wxyz"


def provider_form(**overrides: str) -> dict[str, str]:
    data = {
        "provider_name": "openai",
        "site": "",
        "is_active": "on",
        "api_key": "",
        "api_endpoint": "",
        "organization_id": "",
        "available_models": "[]",
        "default_model": "gpt-4o-mini",
        "requests_per_minute": "",
        "tokens_per_minute": "",
    }
    return {**data, **overrides}


def reload(provider: LLMProvider) -> LLMProvider:
    with tenancy.platform_context():
        return LLMProvider.objects.get(pk=provider.pk)


def assert_no_secret(html: str, *secrets: str) -> None:
    for secret in secrets:
        assert secret not in html
        assert secret[:-4] not in html  # not even all but the hint


@pytest.fixture
def client(login: Callable[[User], Client], agency: Agency) -> Client:
    return login(member(agency, Role.ADMIN))


def test_the_stored_key_never_appears_in_any_admin_page(
    client: Client, agency: Agency, superuser: User, login: Callable[[User], Client]
) -> None:
    provider = LLMProviderFactory.create(agency=agency, api_key=RAW_API_KEY)
    token = reload(provider).api_key_encrypted
    pages = [
        admin_url(LLMProvider, "changelist"),
        change_url(provider),
        admin_url(LLMProvider, "history", provider.pk),
        admin_url(LLMProvider, "delete", provider.pk),
    ]
    for user_client in (client, login(superuser), login(member(agency, Role.VIEWER))):
        for url in pages:
            response = user_client.get(url)
            assert response.status_code in (200, 403), url
            assert_no_secret(response.content.decode(), RAW_API_KEY, token)
    page = client.get(change_url(provider)).content.decode()
    assert "set (ends in …abcd)" in page


def test_a_new_key_is_stored_encrypted_and_not_echoed_back(client: Client, agency: Agency) -> None:
    response = client.post(admin_url(LLMProvider, "add"), provider_form(api_key=NEW_KEY))
    assert response.status_code == 302
    with tenancy.platform_context():
        provider = LLMProvider.objects.get(agency=agency)
    assert provider.get_api_key() == NEW_KEY
    assert NEW_KEY not in provider.api_key_encrypted
    assert_no_secret(client.get(change_url(provider)).content.decode(), NEW_KEY)

    # A form error re-renders the page: the typed key must not come back in the input.
    invalid = provider_form(api_key=NEW_KEY, api_endpoint="not a url")
    response = client.post(change_url(provider), invalid)
    assert response.status_code == 200
    assert "Enter a valid URL" in response.content.decode()
    assert_no_secret(response.content.decode(), NEW_KEY)


def test_a_blank_key_keeps_the_stored_one_and_clearing_removes_it(
    client: Client, agency: Agency
) -> None:
    provider = LLMProviderFactory.create(agency=agency, api_key=RAW_API_KEY)
    response = client.post(change_url(provider), provider_form(default_model="gpt-4o"))
    assert response.status_code == 302
    assert reload(provider).get_api_key() == RAW_API_KEY
    assert reload(provider).default_model == "gpt-4o"

    response = client.post(change_url(provider), provider_form(clear_api_key="on"))
    assert response.status_code == 302
    assert reload(provider).has_api_key is False
    assert "not set" in client.get(change_url(provider)).content.decode()


def test_another_agencys_provider_is_404(client: Client, other_agency: Agency) -> None:
    theirs = LLMProviderFactory.create(agency=other_agency, api_key=RAW_API_KEY)
    assert client.get(change_url(theirs)).status_code == 404
    response = client.post(change_url(theirs), provider_form(api_key=NEW_KEY))
    assert response.status_code == 404
    assert reload(theirs).get_api_key() == RAW_API_KEY


def test_the_limits_section_says_how_they_are_kept(client: Client, agency: Agency) -> None:
    """Staff must know what reaching a limit does to a run (it waits, it does not fail)."""
    provider = LLMProviderFactory.create(agency=agency)
    page = client.get(change_url(provider)).content.decode()
    assert "waits (status waiting_input, without a worker) until the next minute" in page


def test_only_agency_admins_change_provider_credentials(
    agency: Agency, login: Callable[[User], Client]
) -> None:
    # Whoever changes a row's endpoint decides where its stored key goes: not staff.
    provider = LLMProviderFactory.create(agency=agency, api_key=RAW_API_KEY)
    staff = login(member(agency, Role.STAFF))

    assert staff.get(change_url(provider)).status_code == 200  # they still see the row
    form = provider_form(api_endpoint="https://attacker.example.com/v1")
    assert staff.post(change_url(provider), form).status_code == 403
    assert staff.post(admin_url(LLMProvider, "add"), provider_form()).status_code == 403

    assert reload(provider).api_endpoint == ""
    assert reload(provider).get_api_key() == RAW_API_KEY


@pytest.mark.parametrize(
    "change",
    [{"api_endpoint": "https://elsewhere.example.com/v1"}, {"provider_name": "anthropic"}],
    ids=["endpoint", "provider"],
)
def test_pointing_a_row_elsewhere_needs_its_key_entered_again(
    client: Client, agency: Agency, change: dict[str, str]
) -> None:
    # Even an agency admin may not read the stored key: moving the row must not send it away.
    provider = LLMProviderFactory.create(agency=agency, api_key=RAW_API_KEY)

    response = client.post(change_url(provider), provider_form(**change))
    assert response.status_code == 200
    assert "enter the API key for it again" in response.content.decode()
    assert (reload(provider).api_endpoint, reload(provider).provider_name) == ("", "openai")

    assert (
        client.post(change_url(provider), provider_form(**change, api_key=NEW_KEY)).status_code
        == 302
    )
    assert reload(provider).get_api_key() == NEW_KEY


def test_a_superuser_moving_a_row_to_another_agency_enters_its_key_again(
    agency: Agency, other_agency: Agency, superuser: User, login: Callable[[User], Client]
) -> None:
    provider = LLMProviderFactory.create(agency=agency, api_key=RAW_API_KEY)
    response = login(superuser).post(
        change_url(provider), provider_form(agency=str(other_agency.pk))
    )
    assert response.status_code == 200
    assert "enter the API key for it again" in response.content.decode()
    assert reload(provider).agency_id == agency.pk
