"""Provider construction: key resolution and one shared client per configuration."""

from __future__ import annotations

import itertools
import os
import threading
from collections import OrderedDict

from django.conf import settings

from agents.llm.base import Provider, Sleep
from agents.llm.errors import LLMConfigurationError, missing_key_error
from agents.llm.types import ProviderConfig

ENV_KEYS = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "google": "GEMINI_API_KEY",
}
# Google's SDK reads GEMINI_API_KEY, and GOOGLE_API_KEY before it when both are set; the
# gateway reads them the same way, and passes the key to the SDK itself.
GOOGLE_ENV_KEYS = ("GOOGLE_API_KEY", "GEMINI_API_KEY")
# Local OpenAI-compatible servers ignore the key, but the SDK refuses to build a client without one.
LOCAL_PLACEHOLDER_KEY = "not-needed"

# Least recently used first; at most AGENTDESK_LLM_CLIENT_CACHE entries (see get_provider).
_cache: OrderedDict[tuple[ProviderConfig, str, int], Provider] = OrderedDict()
_cache_lock = threading.Lock()
_thread_shard = threading.local()
_next_shard = itertools.count()


def resolve_api_key(config: ProviderConfig) -> str:
    """The key to send: the configured one, else the environment's; raises before any request."""
    if config.kind == "openai_compatible":
        if not config.base_url:
            raise LLMConfigurationError(
                "The OpenAI-compatible provider needs a base URL (for Ollama "
                "http://<host>:11434/v1): set it on the agency's LLM provider in admin. A server "
                "on a private network must also be listed in AGENTDESK_LLM_PRIVATE_NETWORKS.",
                provider=config.kind,
            )
        # Never the environment's OPENAI_API_KEY: it would be sent to a third-party server.
        return config.api_key or LOCAL_PLACEHOLDER_KEY
    if config.api_key:
        return config.api_key
    env_var = ENV_KEYS[config.kind]
    if config.base_url:
        # The platform's key goes only where the platform sends it (the provider's own host, or
        # the operator's OPENAI_BASE_URL / ANTHROPIC_BASE_URL), never to an endpoint a tenant chose.
        raise LLMConfigurationError(
            f"The agency's {config.kind} provider has its own API endpoint ({config.base_url}) "
            f"but no API key: the platform's {env_var} is never sent to an agency's endpoint. "
            "Set the API key on the agency's LLM provider (admin: LLM providers), or clear its "
            "API endpoint to use the platform's key with the provider's own service.",
            provider=config.kind,
        )
    names = GOOGLE_ENV_KEYS if config.kind == "google" else (env_var,)
    key = next((value for name in names if (value := os.environ.get(name, "").strip())), "")
    if not key:
        shown = " or ".join(reversed(names))
        raise missing_key_error(config.kind, shown)
    return key


def get_provider(config: ProviderConfig, *, sleep: Sleep | None = None) -> Provider:
    """The provider for `config`, shared by the callers with the same configuration and key.

    An SDK client is a connection pool (and its warm connections), so clients are kept per
    (config, key): AGENTDESK_LLM_CLIENTS of them, see _shard. They share one SSL context
    (agents/llm/tls.py). A process keeps at most AGENTDESK_LLM_CLIENT_CACHE clients, the most
    recently used: with many agencies' keys, idle pools (each holding open sockets to the
    provider) must not accumulate without bound.
    `sleep` replaces the backoff's sleeping; with it the provider is built fresh and not shared.
    """
    if config.kind not in ("openai", "anthropic", "openai_compatible", "google"):
        raise LLMConfigurationError(
            f"Unknown LLM provider kind {config.kind!r}", provider=config.kind
        )
    if not config.model:
        raise LLMConfigurationError(
            f"No model configured for the {config.kind} provider: set the default model on the "
            "agency's LLM provider or on the agent.",
            provider=config.kind,
        )
    api_key = resolve_api_key(config)
    if sleep is not None:
        return _build(config, api_key, sleep)
    key = (config, api_key, _shard())
    with _cache_lock:
        provider = _cache.get(key)
        if provider is not None:
            _cache.move_to_end(key)
            return provider
        provider = _cache[key] = _build(config, api_key, None)
        while len(_cache) > settings.AGENTDESK_LLM_CLIENT_CACHE:
            # Not closed: a thread may still be in a call with it. Its connections close when
            # the last user lets go of it (garbage collection), so idle ones do not pile up.
            _cache.popitem(last=False)
        return provider


def _shard() -> int:
    """This thread's client of each configuration (threads are dealt out round robin).

    One SDK client is one HTTP connection pool whose bookkeeping runs under one lock and scans
    all its connections per request: with hundreds of calls in flight in a worker, a single
    pool makes them queue. Several pools of a few dozen connections each do not.
    """
    shard: int | None = getattr(_thread_shard, "value", None)
    if shard is None:
        shard = _thread_shard.value = next(_next_shard) % settings.AGENTDESK_LLM_CLIENTS
    return shard


def clear_provider_cache() -> None:
    """Close and forget the shared providers (after a key rotation, or in a forked child)."""
    with _cache_lock:
        providers = list(_cache.values())
        _cache.clear()
    for provider in providers:
        provider.close()


def _build(config: ProviderConfig, api_key: str, sleep: Sleep | None) -> Provider:
    # Each SDK takes about a second to import; load only the one this configuration uses.
    if config.kind == "anthropic":
        from agents.llm.anthropic_provider import AnthropicProvider  # noqa: PLC0415

        provider_class: type[Provider] = AnthropicProvider
    elif config.kind == "google":
        from agents.llm.google_provider import GoogleProvider  # noqa: PLC0415

        provider_class = GoogleProvider
    else:
        from agents.llm.openai_provider import OpenAIProvider  # noqa: PLC0415

        provider_class = OpenAIProvider
    if sleep is None:
        return provider_class(config, api_key=api_key)
    return provider_class(config, api_key=api_key, sleep=sleep)
