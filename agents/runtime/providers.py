"""Which LLM provider a run uses: the agency's configuration (key encrypted at rest), else the
environment (OPENAI_API_KEY / ANTHROPIC_API_KEY)."""

from __future__ import annotations

import threading
import time
import uuid

from django.conf import settings
from django.db.models import Q

from agents.llm import ProviderConfig
from agents.models import Agent, LLMProvider
from core import tenancy

# Every run starts by reading (and decrypting) its provider row: each process keeps the result
# per agency, site, kind and model briefly, like the tool catalogue. A key or endpoint changed in
# the admin reaches new runs within AGENTDESK_CATALOGUE_CACHE_SECONDS.
_cache: dict[tuple[object, ...], tuple[float, ProviderConfig]] = {}
_lock = threading.Lock()


def provider_config_for(agent: Agent, *, agency_id: uuid.UUID) -> ProviderConfig:
    """The agent's provider kind and model, with key and base URL from the agency's active
    provider row for that kind (a site-specific row before an agency-wide one)."""
    key = (agency_id, agent.site_id, agent.llm_provider, agent.llm_model)
    now = time.monotonic()
    with _lock:
        cached = _cache.get(key)
    if cached and now - cached[0] < settings.AGENTDESK_CATALOGUE_CACHE_SECONDS:
        return cached[1]
    config = _load(agent, agency_id)
    with _lock:
        _cache[key] = (now, config)
    return config


def _load(agent: Agent, agency_id: uuid.UUID) -> ProviderConfig:
    with tenancy.agency_context(agency_id):
        row = (
            LLMProvider.objects.filter(agency_id=agency_id, provider_name=agent.llm_provider)
            .filter(Q(site_id=agent.site_id) | Q(site__isnull=True), is_active=True)
            .order_by("site_id", "-is_default")  # NULL (agency-wide) sorts last
            .first()
        )
    return ProviderConfig(
        kind=agent.llm_provider,  # type: ignore[arg-type]
        model=agent.llm_model,
        api_key=row.get_api_key() if row else None,
        base_url=(row.api_endpoint or None) if row else None,
        timeout=settings.AGENTDESK_LLM_TIMEOUT_SECONDS,
        max_retries=settings.AGENTDESK_LLM_MAX_RETRIES,
    )
