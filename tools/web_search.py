"""The ``web_search`` tool's pluggable provider.

AgentDesk ships no search vendor client (and no API keys). A deployment picks one with the setting
``AGENTDESK_WEB_SEARCH_PROVIDER`` (environment variable of the same name), which is either

- the name of a provider registered in code with :func:`register_provider`, or
- a dotted path ``package.module.Factory`` to a class or zero-argument callable returning a
  :class:`WebSearchProvider` (loaded with Django's ``import_string``).

Unset (the default) means web search is off: :func:`search` raises :class:`WebSearchNotConfigured`
whose message tells the model (and, through the trace, the user) what to configure.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from django.conf import settings
from django.utils.module_loading import import_string

__all__ = [
    "MAX_RESULTS",
    "SETTING",
    "SearchResult",
    "WebSearchError",
    "WebSearchNotConfigured",
    "WebSearchProvider",
    "configured_provider_name",
    "get_provider",
    "register_provider",
    "search",
    "unregister_provider",
]

SETTING = "AGENTDESK_WEB_SEARCH_PROVIDER"
MAX_RESULTS = 20
MAX_QUERY_CHARS = 500


@dataclass(frozen=True, slots=True)
class SearchResult:
    title: str
    url: str
    snippet: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"title": self.title, "url": self.url, "snippet": self.snippet}


@runtime_checkable
class WebSearchProvider(Protocol):
    """What a search vendor adapter implements. It may raise :class:`WebSearchError`."""

    name: str

    def search(self, query: str, *, max_results: int) -> list[SearchResult]: ...


class WebSearchError(Exception):
    """A search that could not be done; ``str(exc)`` is meant for the model's tool result."""

    code = "search_failed"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class WebSearchNotConfigured(WebSearchError):
    code = "not_configured"


ProviderFactory = Callable[[], WebSearchProvider]
_registry: dict[str, ProviderFactory] = {}
_lock = threading.Lock()


def register_provider(name: str, factory: ProviderFactory) -> None:
    """Make ``factory`` selectable as ``AGENTDESK_WEB_SEARCH_PROVIDER=<name>``."""
    if not name or name != name.strip():
        raise ValueError(f"invalid web search provider name {name!r}")
    with _lock:
        _registry[name] = factory


def unregister_provider(name: str) -> None:
    with _lock:
        _registry.pop(name, None)


def configured_provider_name() -> str:
    """The setting's value, stripped; ``""`` when web search is not configured."""
    return str(getattr(settings, SETTING, "") or "").strip()


def get_provider() -> WebSearchProvider:
    """The configured provider, or :class:`WebSearchNotConfigured` with what to do about it."""
    name = configured_provider_name()
    if not name:
        raise WebSearchNotConfigured(
            "Web search is not configured on this AgentDesk installation, so the web_search tool "
            "cannot be used; continue without it. An administrator can enable it by setting "
            f"{SETTING} to a registered provider name or to the dotted path of a provider class "
            "(see .env.example)."
        )
    with _lock:
        factory = _registry.get(name)
    if factory is None:
        if "." not in name:
            known = ", ".join(sorted(_registry)) or "none"
            raise WebSearchNotConfigured(
                f"Web search provider {name!r} (setting {SETTING}) is not registered "
                f"(registered: {known}); web search is unavailable."
            )
        try:
            factory = import_string(name)
        except ImportError as exc:
            raise WebSearchNotConfigured(
                f"Web search provider {name!r} (setting {SETTING}) cannot be imported: {exc}; "
                "web search is unavailable."
            ) from exc
    provider = factory()
    if not isinstance(provider, WebSearchProvider):
        raise WebSearchNotConfigured(
            f"Web search provider {name!r} (setting {SETTING}) does not implement "
            "search(query, *, max_results); web search is unavailable."
        )
    return provider


def search(query: str, *, max_results: int = 5) -> list[SearchResult]:
    """Search the web with the configured provider; at most ``max_results`` results."""
    query = query.strip()
    if not query:
        raise WebSearchError("The search query is empty.", code="bad_query")
    if len(query) > MAX_QUERY_CHARS:
        raise WebSearchError(
            f"The search query is {len(query)} characters long; the maximum is {MAX_QUERY_CHARS}.",
            code="bad_query",
        )
    if not 1 <= max_results <= MAX_RESULTS:
        raise WebSearchError(
            f"max_results must be between 1 and {MAX_RESULTS}, got {max_results}.",
            code="bad_query",
        )
    provider = get_provider()
    return provider.search(query, max_results=max_results)[:max_results]
