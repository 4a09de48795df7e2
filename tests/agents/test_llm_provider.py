"""LLM provider API keys: encrypted at rest, never shown, rotated by the management command."""

from __future__ import annotations

import io

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from pytest_django.fixtures import Settings

from agents.models import LLMProvider
from core import tenancy
from tests.agents.factories import LLMProviderFactory
from tests.factories import AgencyFactory

pytestmark = pytest.mark.django_db

API_KEY = "sk-proj-TESTKEY-0123456789abcdef"


def _raw_key_column(provider: LLMProvider) -> str:
    with tenancy.agency_context(provider.agency_id), connection.cursor() as cursor:
        cursor.execute(
            "SELECT api_key_encrypted FROM agents_llmprovider WHERE id = %s", [provider.pk]
        )
        return str(cursor.fetchone()[0])


def test_api_key_is_encrypted_in_the_database_and_round_trips() -> None:
    provider = LLMProviderFactory.create(api_key=API_KEY)
    raw = _raw_key_column(provider)
    assert raw.startswith("gAAAAA")  # a Fernet token
    assert API_KEY not in raw
    assert "TESTKEY" not in raw
    with tenancy.agency_context(provider.agency_id):
        loaded = LLMProvider.objects.get(pk=provider.pk)
    assert loaded.has_api_key
    assert loaded.get_api_key() == API_KEY
    assert loaded.api_key_hint == "cdef"


def test_the_key_never_appears_in_str_or_repr() -> None:
    provider = LLMProviderFactory.create(api_key=API_KEY)
    for text in (str(provider), repr(provider)):
        assert API_KEY not in text
        assert provider.api_key_encrypted not in text
    assert "OpenAI" in str(provider)


def test_clearing_the_key() -> None:
    provider = LLMProviderFactory.create(api_key=API_KEY)
    provider.set_api_key("")
    assert not provider.has_api_key
    assert provider.get_api_key() is None
    assert provider.api_key_hint == ""


def test_the_key_field_is_not_editable_in_forms() -> None:
    field = LLMProvider._meta.get_field("api_key_encrypted")
    assert field.editable is False


def test_rotation_reencrypts_every_stored_key_with_the_new_primary(
    settings: Settings,
) -> None:
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.AGENTDESK_ENCRYPTION_KEYS = [old]
    first = LLMProviderFactory.create(api_key=API_KEY)
    second = LLMProviderFactory.create(agency=AgencyFactory.create(), api_key="sk-ant-other-key-9")
    keyless = LLMProviderFactory.create()
    before = {p.pk: _raw_key_column(p) for p in (first, second)}

    settings.AGENTDESK_ENCRYPTION_KEYS = [new, old]
    out = io.StringIO()
    call_command("rotate_encryption_keys", stdout=out)
    assert "agents.LLMProvider.api_key_encrypted: 2 re-encrypted" in out.getvalue()

    after = {p.pk: _raw_key_column(p) for p in (first, second)}
    for pk, token in after.items():
        assert token != before[pk]
        Fernet(new.encode()).decrypt(token.encode())  # made by the new key alone
    assert _raw_key_column(keyless) in {"", "None"}

    # With the old key gone, the keys still decrypt.
    settings.AGENTDESK_ENCRYPTION_KEYS = [new]
    with tenancy.platform_context():
        assert LLMProvider.objects.get(pk=first.pk).get_api_key() == API_KEY
        assert LLMProvider.objects.get(pk=second.pk).get_api_key() == "sk-ant-other-key-9"

    # Running it again changes nothing.
    out = io.StringIO()
    call_command("rotate_encryption_keys", stdout=out)
    assert "Done: 0 secrets re-encrypted" in out.getvalue()


def test_rotation_with_an_unknown_token_changes_nothing(settings: Settings) -> None:
    settings.AGENTDESK_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    good = LLMProviderFactory.create(api_key=API_KEY)
    orphan = LLMProviderFactory.create(agency=AgencyFactory.create())
    with tenancy.platform_context():
        orphan_key = Fernet(Fernet.generate_key()).encrypt(b"lost").decode()
        LLMProvider.objects.filter(pk=orphan.pk).update(api_key_encrypted=orphan_key)
    before = _raw_key_column(good)
    settings.AGENTDESK_ENCRYPTION_KEYS = [
        Fernet.generate_key().decode(),
        *settings.AGENTDESK_ENCRYPTION_KEYS,
    ]
    with pytest.raises(CommandError, match="Nothing was changed"):
        call_command("rotate_encryption_keys", stdout=io.StringIO())
    assert _raw_key_column(good) == before


def test_providers_are_isolated_per_agency() -> None:
    provider = LLMProviderFactory.create(api_key=API_KEY)
    other = AgencyFactory.create()
    with tenancy.agency_context(other.id):
        assert not LLMProvider.objects.filter(pk=provider.pk).exists()
