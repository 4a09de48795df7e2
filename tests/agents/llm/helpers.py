"""Shared by the gateway tests (fixtures live in conftest.py)."""

from __future__ import annotations

from collections.abc import Callable

from agents.llm.base import Provider
from agents.llm.types import ProviderKind
from devkit.fake_server import FakeProviderServer

MakeProvider = Callable[..., Provider]


def base_url(server: FakeProviderServer, kind: ProviderKind) -> str:
    if kind == "anthropic":
        return server.anthropic_base_url
    if kind == "google":
        return server.google_base_url
    return server.openai_base_url
