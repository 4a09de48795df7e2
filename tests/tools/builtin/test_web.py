"""web_search and web_scrape as tools: clear errors, and no request to a non-public address.

No test here reaches the network: the scrape targets are refused before any connection, which an
audit hook on ``socket.connect`` proves.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.tools.builtin.conftest import call, call_error
from tools.handlers import ToolContext
from tools.web_search import SearchResult, register_provider, unregister_provider

_connects: list[Any] = []
_recording = threading.Event()


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _recording.is_set() and event == "socket.connect":
        _connects.append(args[1])


sys.addaudithook(_audit)  # inert outside the `connections` fixture


@pytest.fixture
def connections() -> Iterator[list[Any]]:
    _connects.clear()
    _recording.set()
    try:
        yield _connects
    finally:
        _recording.clear()


class OfflineProvider:
    name = "offline"

    def search(self, query: str, *, max_results: int) -> list[SearchResult]:
        return [
            SearchResult(title=f"{query} {i}", url=f"https://example.com/{i}", snippet="s" * 1000)
            for i in range(max_results)
        ]


@pytest.fixture
def offline_search(settings: Any) -> Iterator[None]:
    register_provider("offline-builtin-test", OfflineProvider)
    settings.AGENTDESK_WEB_SEARCH_PROVIDER = "offline-builtin-test"
    yield
    unregister_provider("offline-builtin-test")


def test_web_search_not_configured_is_a_clear_tool_error(ctx: ToolContext, settings: Any) -> None:
    settings.AGENTDESK_WEB_SEARCH_PROVIDER = ""

    error = call_error(ctx, "web_search", {"query": "acme"})

    assert error.code == "not_configured"
    assert "AGENTDESK_WEB_SEARCH_PROVIDER" in error.message


@pytest.mark.usefixtures("offline_search")
def test_web_search_returns_compact_results_capped_at_10(ctx: ToolContext) -> None:
    result = call(ctx, "web_search", {"query": "acme", "num_results": 50})

    assert result["count"] == 10
    assert result["results"][0]["title"] == "acme 0"
    assert len(result["results"][0]["snippet"]) == 400


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://127.0.0.1:8000/admin/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/",
    ],
)
def test_web_scrape_refuses_loopback_and_metadata_addresses_without_connecting(
    ctx: ToolContext, url: str, connections: list[Any]
) -> None:
    error = call_error(ctx, "web_scrape", {"url": url})

    assert error.code == "blocked_address"
    assert error.details["url"]
    assert connections == []


def test_web_scrape_refuses_other_schemes(ctx: ToolContext, connections: list[Any]) -> None:
    error = call_error(ctx, "web_scrape", {"url": "file:///etc/passwd"})

    assert error.code == "bad_scheme"
    assert connections == []
