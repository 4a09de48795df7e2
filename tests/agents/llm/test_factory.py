"""Key resolution and provider construction."""

from __future__ import annotations

import dataclasses
import ssl
import threading
from typing import Any

import pytest

from agents.llm.factory import LOCAL_PLACEHOLDER_KEY, clear_provider_cache, get_provider
from agents.llm.tls import shared_ssl_context
from agents.llm.types import LLMConfigurationError, Message, ProviderConfig, ProviderKind
from devkit.fake_server import FakeProviderServer, text_reply
from tests.agents.llm.helpers import base_url

ENV_VARS = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "google": "GEMINI_API_KEY",
}
KINDS: list[ProviderKind] = ["openai", "anthropic", "google"]


@pytest.mark.parametrize("kind", KINDS)
def test_missing_key_fails_before_any_request_and_says_what_to_configure(
    kind: ProviderKind, fake_llm: FakeProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_VARS[kind], raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)  # Google's other name for it
    config = ProviderConfig(kind=kind, model="fake-model", base_url=base_url(fake_llm, kind))

    with pytest.raises(LLMConfigurationError) as caught:
        get_provider(config).complete([Message.user("hi")])

    message = str(caught.value)
    assert ENV_VARS[kind] in message
    assert "agency's LLM provider" in message
    assert caught.value.code == "llm_not_configured"
    assert fake_llm.request_count == 0


# The SDKs' own variables for the platform's endpoint (the operator's, like the keys).
BASE_URL_VARS = {
    "openai": "OPENAI_BASE_URL",
    "anthropic": "ANTHROPIC_BASE_URL",
    "google": "GOOGLE_GEMINI_BASE_URL",
}


@pytest.mark.parametrize("kind", KINDS)
def test_key_comes_from_the_environment_when_the_config_has_none(
    kind: ProviderKind, fake_llm: FakeProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_VARS[kind], f"env-{kind}-key")
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)  # it would win over GEMINI_API_KEY
    monkeypatch.setenv(BASE_URL_VARS[kind], base_url(fake_llm, kind))
    fake_llm.enqueue(text_reply("ok"))
    config = ProviderConfig(kind=kind, model="fake-model")

    provider = get_provider(config)
    try:
        provider.complete([Message.user("hi")])
    finally:
        clear_provider_cache()

    assert fake_llm.requests[0].api_key == f"env-{kind}-key"


@pytest.mark.parametrize("kind", KINDS)
def test_the_platform_key_is_never_sent_to_an_endpoint_the_agency_chose(
    kind: ProviderKind, fake_llm: FakeProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agency that sets its own API endpoint but no key must not receive the platform's."""
    monkeypatch.setenv(ENV_VARS[kind], f"platform-{kind}-key")
    config = ProviderConfig(kind=kind, model="fake-model", base_url=base_url(fake_llm, kind))

    with pytest.raises(LLMConfigurationError) as caught:
        get_provider(config).complete([Message.user("hi")])

    assert "own API endpoint" in str(caught.value)
    assert ENV_VARS[kind] in str(caught.value)
    assert fake_llm.request_count == 0


def test_openai_compatible_server_works_without_a_key_and_never_gets_the_openai_key(
    fake_llm: FakeProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "the-real-openai-key")
    fake_llm.enqueue(text_reply("local model says hi"))
    config = ProviderConfig(
        kind="openai_compatible", model="llama3.2", base_url=fake_llm.openai_base_url
    )

    provider = get_provider(config)
    try:
        completion = provider.complete([Message.user("hi")], max_tokens=64)
    finally:
        clear_provider_cache()

    assert completion.text == "local model says hi"
    assert completion.provider == "openai_compatible"
    request = fake_llm.requests[0]
    assert request.api_key == LOCAL_PLACEHOLDER_KEY
    assert request.model == "llama3.2"
    # Local servers (Ollama, llama.cpp) read max_tokens, not OpenAI's newer max_completion_tokens.
    assert request.body["max_tokens"] == 64
    assert "max_completion_tokens" not in request.body


def test_openai_compatible_without_base_url_is_a_configuration_error() -> None:
    with pytest.raises(LLMConfigurationError, match="base URL"):
        get_provider(ProviderConfig(kind="openai_compatible", model="llama3.2"))


def test_missing_model_is_a_configuration_error() -> None:
    with pytest.raises(LLMConfigurationError, match="No model configured"):
        get_provider(ProviderConfig(kind="openai", model="", api_key="k"))


def test_providers_are_shared_per_configuration(fake_llm: FakeProviderServer) -> None:
    config = ProviderConfig(
        kind="openai", model="m", api_key="k", base_url=fake_llm.openai_base_url
    )
    try:
        first = get_provider(config)
        assert get_provider(config) is first
        assert get_provider(dataclasses.replace(config, api_key="other")) is not first
    finally:
        clear_provider_cache()


@pytest.mark.parametrize("kind", KINDS)
def test_sdk_clients_share_one_ssl_context_that_still_verifies_certificates(
    kind: ProviderKind,
) -> None:
    """Each SDK client would otherwise load the CA bundle into a context of its own (~24 ms of
    CPU, ~0.8 MB) — one per agency configuration and shard in a worker."""
    config = ProviderConfig(kind=kind, model="m", api_key="k", base_url="https://llm.example")
    try:
        providers = [get_provider(dataclasses.replace(config, api_key=f"k{n}")) for n in (1, 2)]
        # The HTTP client the SDK was given (Google's SDK takes it in its HTTP options).
        clients = [getattr(p, "_http", None) or p._client._client for p in providers]  # type: ignore[attr-defined]
        contexts = [client._transport._pool._ssl_context for client in clients]
    finally:
        clear_provider_cache()
    assert providers[0] is not providers[1]
    assert contexts[0] is contexts[1] is shared_ssl_context()
    assert shared_ssl_context().verify_mode == ssl.CERT_REQUIRED
    assert shared_ssl_context().check_hostname


def test_a_process_keeps_the_most_recently_used_clients_only(
    fake_llm: FakeProviderServer, settings: Any
) -> None:
    settings.AGENTDESK_LLM_CLIENT_CACHE = 2
    config = ProviderConfig(
        kind="openai", model="m", api_key="a", base_url=fake_llm.openai_base_url
    )
    b, c = (dataclasses.replace(config, api_key=key) for key in ("b", "c"))
    try:
        first_a, first_b = get_provider(config), get_provider(b)
        assert get_provider(config) is first_a  # a hit: now the most recently used
        get_provider(c)  # a third: the least recently used (b) goes
        assert get_provider(config) is first_a
        assert get_provider(b) is not first_b
        fake_llm.enqueue(text_reply("ok"))
        assert get_provider(b).complete([Message.user("hi")], []).text == "ok"  # rebuilt, works
    finally:
        clear_provider_cache()


def test_threads_are_dealt_over_a_few_clients_per_configuration(
    fake_llm: FakeProviderServer, settings: Any
) -> None:
    settings.AGENTDESK_LLM_CLIENTS = 3
    config = ProviderConfig(
        kind="openai", model="m", api_key="k", base_url=fake_llm.openai_base_url
    )
    seen: list[int] = []

    def use() -> None:
        provider = get_provider(config)
        assert get_provider(config) is provider  # a thread keeps its client
        seen.append(id(provider))

    try:
        threads = [threading.Thread(target=use) for _ in range(9)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        clear_provider_cache()
    assert len(seen) == 9
    assert len(set(seen)) == 3


def test_api_key_stays_out_of_the_config_repr() -> None:
    config = ProviderConfig(kind="anthropic", model="m", api_key="sk-secret")

    assert "sk-secret" not in repr(config)
