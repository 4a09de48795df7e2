"""The local model loaded once for the session (the gateway keeps it per process), and a fake
provider server for the OpenAI-compatible provider's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devkit.fake_server import FakeProviderServer
from memory import embeddings
from memory.embeddings.local import MiniLM
from memory.embeddings.openai_provider import clear_clients


@pytest.fixture(scope="session")
def local_model() -> MiniLM:
    return embeddings.local_model()


@pytest.fixture
def fake_embeddings() -> Iterator[FakeProviderServer]:
    with FakeProviderServer() as server:
        yield server
    clear_clients()  # no client of this server's port outlives it


@pytest.fixture(autouse=True)
def _fresh_agency_choices() -> Iterator[None]:
    """Tests change an agency's embedding model and expect the next call to see it."""
    embeddings.clear_config_cache()
    yield
    embeddings.clear_config_cache()
