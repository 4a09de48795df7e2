"""web_search: off by default with a clear error; providers plug in by name or dotted path."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.conf import settings as django_settings
from django.test import override_settings

from tools import web_search
from tools.web_search import (
    SearchResult,
    WebSearchError,
    WebSearchNotConfigured,
    register_provider,
    search,
    unregister_provider,
)


class StaticProvider:
    """A real (offline) provider: answers from a fixed list and records the queries it got."""

    name = "static"

    def __init__(self) -> None:
        self.queries: list[tuple[str, int]] = []

    def search(self, query: str, *, max_results: int) -> list[SearchResult]:
        self.queries.append((query, max_results))
        # Returns more than asked for, to show search() enforces the cap itself.
        return [
            SearchResult(title=f"{query} #{i}", url=f"https://example.com/{i}", snippet="...")
            for i in range(max_results + 3)
        ]


class NotAProvider:
    name = "broken"


@pytest.fixture
def static_provider() -> Iterator[StaticProvider]:
    provider = StaticProvider()
    register_provider("static-test", lambda: provider)
    yield provider
    unregister_provider("static-test")


def test_the_setting_defaults_to_off() -> None:
    assert django_settings.AGENTDESK_WEB_SEARCH_PROVIDER == ""
    assert web_search.configured_provider_name() == ""


@override_settings(AGENTDESK_WEB_SEARCH_PROVIDER="")
def test_search_without_a_provider_explains_how_to_configure_it() -> None:
    with pytest.raises(WebSearchNotConfigured) as excinfo:
        search("acme corp")
    error = excinfo.value
    assert isinstance(error, WebSearchError)
    assert error.code == "not_configured"
    assert "Web search is not configured" in str(error)
    assert "AGENTDESK_WEB_SEARCH_PROVIDER" in str(error)
    assert "continue without it" in str(error)


@override_settings(AGENTDESK_WEB_SEARCH_PROVIDER="static-test")
def test_a_registered_provider_is_used_and_results_are_capped(
    static_provider: StaticProvider,
) -> None:
    results = search("  acme corp  ", max_results=2)
    assert [r.title for r in results] == ["acme corp #0", "acme corp #1"]
    assert static_provider.queries == [("acme corp", 2)]
    assert results[0].to_dict() == {
        "title": "acme corp #0",
        "url": "https://example.com/0",
        "snippet": "...",
    }


@override_settings(AGENTDESK_WEB_SEARCH_PROVIDER="tests.tools.test_web_search.StaticProvider")
def test_a_provider_can_be_named_by_dotted_path() -> None:
    assert [r.url for r in search("q", max_results=1)] == ["https://example.com/0"]


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("nosuchprovider", "is not registered"),
        ("tests.tools.test_web_search.Missing", "cannot be imported"),
        ("tests.tools.test_web_search.NotAProvider", "does not implement"),
    ],
)
def test_a_misconfigured_provider_is_a_not_configured_error(value: str, fragment: str) -> None:
    with (
        override_settings(AGENTDESK_WEB_SEARCH_PROVIDER=value),
        pytest.raises(WebSearchNotConfigured, match=fragment),
    ):
        search("q")


@pytest.mark.parametrize(
    ("query", "max_results", "fragment"),
    [
        ("   ", 5, "empty"),
        ("x" * 501, 5, "maximum is 500"),
        ("q", 0, "between 1 and 20"),
        ("q", 21, "between 1 and 20"),
    ],
)
@override_settings(AGENTDESK_WEB_SEARCH_PROVIDER="static-test")
def test_bad_queries_are_refused_before_any_provider_runs(
    static_provider: StaticProvider, query: str, max_results: int, fragment: str
) -> None:
    with pytest.raises(WebSearchError, match=fragment) as excinfo:
        search(query, max_results=max_results)
    assert excinfo.value.code == "bad_query"
    assert static_provider.queries == []


def test_register_provider_rejects_blank_names() -> None:
    with pytest.raises(ValueError, match="invalid web search provider name"):
        register_provider(" ", StaticProvider)
