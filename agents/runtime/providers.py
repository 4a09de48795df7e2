"""Which LLM provider a run uses: the agency's configuration (key encrypted at rest), else the
environment (OPENAI_API_KEY / ANTHROPIC_API_KEY)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db.models import Q

from agents.llm import ProviderConfig
from agents.models import Agent, LLMProvider
from agents.runtime.provider_limits import ProviderLimits
from core import tenancy
from core.catalogue import CatalogueCache

# Every run starts by reading (and decrypting) its provider row: kept per agency, site, kind and
# model like the tool catalogue (core.catalogue).
_configs = CatalogueCache[tuple[ProviderConfig, ProviderLimits | None]]()


def provider_config_for(agent: Agent, *, agency_id: uuid.UUID) -> ProviderConfig:
    """The agent's provider kind and model, with key and base URL from the agency's active
    provider row for that kind (a site-specific row before an agency-wide one)."""
    return _settings(agent, agency_id)[0]


def provider_limits_for(agent: Agent, *, agency_id: uuid.UUID) -> ProviderLimits | None:
    """The requests and tokens per minute of the provider row the agent's runs use (None
    without a row: the environment's key has no limits of the agency's)."""
    return _settings(agent, agency_id)[1]


def _settings(agent: Agent, agency_id: uuid.UUID) -> tuple[ProviderConfig, ProviderLimits | None]:
    key = (agency_id, agent.site_id, agent.llm_provider, agent.llm_model)
    return _configs.get(key, lambda: _load(agent, agency_id))


def _load(agent: Agent, agency_id: uuid.UUID) -> tuple[ProviderConfig, ProviderLimits | None]:
    with tenancy.agency_context(agency_id):
        row = (
            LLMProvider.objects.filter(agency_id=agency_id, provider_name=agent.llm_provider)
            .filter(Q(site_id=agent.site_id) | Q(site__isnull=True), is_active=True)
            .order_by("site_id", "-is_default")  # NULL (agency-wide) sorts last
            .first()
        )
    api_key = row.get_api_key() if row else None
    limits = (
        ProviderLimits(
            provider_id=row.id,
            requests_per_minute=row.requests_per_minute,
            tokens_per_minute=row.tokens_per_minute,
        )
        if row
        else None
    )
    config = ProviderConfig(
        kind=agent.llm_provider,  # type: ignore[arg-type]
        model=agent.llm_model or (row.default_model if row else ""),
        api_key=api_key,
        base_url=(row.api_endpoint or None) if row else None,
        # With the agency's own key only: an organization id would pick what the platform's
        # key is billed to.
        organization=(row.organization_id or None) if row and api_key else None,
        timeout=settings.AGENTDESK_LLM_TIMEOUT_SECONDS,
        max_retries=settings.AGENTDESK_LLM_MAX_RETRIES,
    )
    return config, limits
