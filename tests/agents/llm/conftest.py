"""A fake provider server per test, and providers pointed at it with a tiny backoff."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from agents.llm.base import Provider
from agents.llm.factory import get_provider
from agents.llm.types import ProviderConfig, ProviderKind
from devkit.fake_server import FakeProviderServer
from tests.agents.llm.helpers import MakeProvider, base_url


@pytest.fixture
def fake_llm() -> Iterator[FakeProviderServer]:
    with FakeProviderServer() as server:
        yield server


@pytest.fixture
def sleeps() -> list[float]:
    """Backoff delays the provider asked for; a provider built with `sleeps.append` never sleeps."""
    return []


@pytest.fixture
def make_provider(fake_llm: FakeProviderServer) -> Iterator[MakeProvider]:
    built: list[Provider] = []

    def make(kind: ProviderKind, **overrides: Any) -> Provider:
        options: dict[str, Any] = {
            "kind": kind,
            "model": "fake-model",
            "api_key": "test-key",
            "base_url": base_url(fake_llm, kind),
            "timeout": 5.0,
            "max_retries": 2,
            "backoff_base": 0.001,
            "backoff_max": 0.01,
        }
        sleep = overrides.pop("sleep", time.sleep)
        options.update(overrides)
        # Built fresh (uncached) so a test's config never leaks a client into another test.
        provider = get_provider(ProviderConfig(**options), sleep=sleep)
        built.append(provider)
        return provider

    yield make
    for provider in built:
        provider.close()
