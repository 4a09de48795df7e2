"""The per-process catalogue cache that tools, risk rules, prices and provider settings share."""

from __future__ import annotations

from typing import Any

from core.catalogue import CatalogueCache


def test_values_are_reused_for_the_configured_time_per_key(settings: Any) -> None:
    settings.AGENTDESK_CATALOGUE_CACHE_SECONDS = 30
    loads: list[str] = []
    cache = CatalogueCache[str]()

    def load(key: str) -> str:
        loads.append(key)
        return f"value of {key}"

    assert cache.get("a", lambda: load("a")) == "value of a"
    assert cache.get("a", lambda: load("a")) == "value of a"
    assert cache.get("b", lambda: load("b")) == "value of b"
    assert loads == ["a", "b"]

    cache.clear()
    cache.get("a", lambda: load("a"))
    assert loads == ["a", "b", "a"]


def test_zero_seconds_reads_every_time(settings: Any) -> None:
    settings.AGENTDESK_CATALOGUE_CACHE_SECONDS = 0
    loads: list[str] = []
    cache = CatalogueCache[int]()

    def load() -> int:
        loads.append("k")
        return len(loads)

    assert [cache.get("k", load) for _ in range(3)] == [1, 2, 3]
