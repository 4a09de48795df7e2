"""Google Gemini in the admin and the price list: an agency admin adds a Gemini provider with its
key (stored encrypted, never shown), its runs get a Google configuration, and Gemini's calls cost
the platform prices seeded by usage 0005."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.test import Client

from agents.llm.types import Usage
from agents.models import LLMProvider
from agents.runtime.providers import provider_config_for
from core import tenancy
from core.models import Role
from tests.admin.helpers import admin_url, change_url
from tests.agents.factories import AgentFactory
from tests.factories import AgencyFactory, MembershipFactory, SiteFactory
from usage.models import ModelPrice
from usage.pricing import price_for

pytestmark = pytest.mark.django_db

GEMINI_KEY = "AIzaSy-SECRET-gemini-key-0123456789"


def _form(**overrides: str) -> dict[str, str]:
    data = {
        "provider_name": "google",
        "site": "",
        "is_active": "on",
        "api_key": GEMINI_KEY,
        "api_endpoint": "",
        "organization_id": "",
        "available_models": '["gemini-2.5-flash", "gemini-2.5-pro"]',
        "default_model": "gemini-2.5-flash",
        "requests_per_minute": "",
        "tokens_per_minute": "",
    }
    return {**data, **overrides}


def test_an_agency_admin_adds_a_gemini_provider_its_runs_use() -> None:
    agency = AgencyFactory.create()
    client = Client()
    client.force_login(MembershipFactory.create(agency=agency, role=Role.ADMIN).user)

    page = client.get(admin_url(LLMProvider, "add")).content.decode()
    assert '<option value="google">Google Gemini</option>' in page
    assert "Gemini API key" in page  # the credentials section says what Google needs
    response = client.post(admin_url(LLMProvider, "add"), _form())

    assert response.status_code == 302
    with tenancy.platform_context():
        provider = LLMProvider.objects.get(agency=agency)
    assert provider.provider_name == "google"
    assert provider.get_api_key() == GEMINI_KEY
    assert GEMINI_KEY not in provider.api_key_encrypted
    shown = client.get(change_url(provider)).content.decode()
    assert GEMINI_KEY not in shown
    assert GEMINI_KEY[:-4] not in shown

    agent = AgentFactory.create(
        agency=agency,
        site=SiteFactory.create(agency=agency),
        llm_provider="google",
        llm_model="",
    )
    config = provider_config_for(agent, agency_id=agency.id)
    assert (config.kind, config.model, config.api_key, config.base_url) == (
        "google",
        "gemini-2.5-flash",
        GEMINI_KEY,
        None,
    )


@pytest.mark.parametrize(
    ("model", "input_", "output", "cached"),
    [
        ("gemini-2.5-flash", "0.30", "2.50", "0.03"),
        ("gemini-2.5-pro", "1.25", "10.00", "0.125"),
        ("gemini-2.5-flash-lite", "0.10", "0.40", "0.01"),
        ("gemini-2.0-flash", "0.10", "0.40", "0.025"),
    ],
)
def test_gemini_models_have_platform_prices(
    model: str, input_: str, output: str, cached: str
) -> None:
    agency = AgencyFactory.create()
    with tenancy.platform_context():
        row = ModelPrice.objects.get(agency=None, provider="google", model=model)
    assert (row.input_per_mtok, row.output_per_mtok, row.cache_read_per_mtok) == (
        Decimal(input_),
        Decimal(output),
        Decimal(cached),
    )

    price = price_for(agency_id=agency.id, provider="google", model=model)
    million = Usage(input_tokens=1_000_000, output_tokens=1_000_000, cache_read_tokens=1_000_000)
    assert price.cost(million) == Decimal(input_) + Decimal(output) + Decimal(cached)
