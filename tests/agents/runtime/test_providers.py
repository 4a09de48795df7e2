"""Which provider settings a run uses: the agency's row (key decrypted, endpoint, organization,
default model), the site's row before the agency-wide one, inactive rows never."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agents.llm import clear_provider_cache, get_provider
from agents.llm.types import Message
from agents.models import Agent, Execution
from agents.runtime.providers import provider_config_for
from agents.runtime.setup import build_snapshot
from core import tenancy
from devkit.fake_server import FakeProviderServer, text_reply
from tests.agents.factories import AgentFactory, LLMProviderFactory
from tests.factories import SiteFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def server(settings: Any) -> Iterator[FakeProviderServer]:
    settings.AGENTDESK_CATALOGUE_CACHE_SECONDS = 0  # each test edits the rows
    with FakeProviderServer() as fake:
        yield fake
    clear_provider_cache()


def _agent(**fields: Any) -> Agent:
    site = SiteFactory.create()
    return AgentFactory.create(agency=site.agency, site=site, **fields)


def test_the_agencys_decrypted_key_and_organization_go_to_its_endpoint(
    server: FakeProviderServer,
) -> None:
    agent = _agent(llm_provider="openai", llm_model="agency-model")
    LLMProviderFactory.create(
        agency=agent.agency,
        api_key="agency-key-1234",
        api_endpoint=server.openai_base_url,
        organization_id="org-agency",
    )
    server.enqueue(text_reply("hi"))

    config = provider_config_for(agent, agency_id=agent.agency_id)
    get_provider(config).complete([Message.user("hello")])

    request = server.requests[0]
    assert request.api_key == "agency-key-1234"
    assert request.headers["openai-organization"] == "org-agency"
    assert request.model == "agency-model"


def test_the_sites_row_wins_over_the_agency_wide_one_and_inactive_rows_are_skipped(
    server: FakeProviderServer,
) -> None:
    agent = _agent(llm_provider="openai")
    LLMProviderFactory.create(agency=agent.agency, api_key="agency-wide")
    site_row = LLMProviderFactory.create(agency=agent.agency, site=agent.site, api_key="site")
    assert provider_config_for(agent, agency_id=agent.agency_id).api_key == "site"

    with tenancy.agency_context(agent.agency_id):
        site_row.is_active = False
        site_row.save(update_fields=["is_active"])
    assert provider_config_for(agent, agency_id=agent.agency_id).api_key == "agency-wide"


def test_an_agent_without_a_model_uses_the_providers_default_model(
    server: FakeProviderServer,
) -> None:
    agent = _agent(llm_provider="anthropic", llm_model="")
    LLMProviderFactory.create(
        agency=agent.agency, provider_name="anthropic", default_model="claude-house-default"
    )
    assert provider_config_for(agent, agency_id=agent.agency_id).model == "claude-house-default"


def test_an_organization_id_goes_only_with_the_agencys_own_key(
    server: FakeProviderServer,
) -> None:
    """Without a key of its own the agency uses the platform's, and must not choose which of
    its organizations pays."""
    agent = _agent(llm_provider="openai")
    LLMProviderFactory.create(agency=agent.agency, organization_id="org-agency")
    config = provider_config_for(agent, agency_id=agent.agency_id)
    assert config.api_key is None
    assert config.organization is None


def test_a_run_of_an_agent_without_a_model_is_priced_at_the_default_model(
    server: FakeProviderServer,
) -> None:
    """The snapshot names the model the run asks for, prices and records: not ``""`` (free)."""
    agent = _agent(llm_provider="openai", llm_model="")
    LLMProviderFactory.create(agency=agent.agency, default_model="gpt-house-default")
    with tenancy.agency_context(agent.agency_id):
        snapshot = build_snapshot(agent, Execution(agent=agent))
    assert snapshot["llm_model"] == "gpt-house-default"
