"""An agency's own LLM endpoint: only public addresses, or the networks the operator allows."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import httpx2
import pytest

from agents.llm.endpoints import EndpointRefused, http_client
from agents.llm.types import LLMConfigurationError, LLMDeadlineExceeded, Message, ProviderKind
from devkit.fake_server import FakeProviderServer, text_reply
from tests.agents.llm.helpers import MakeProvider

KINDS: list[ProviderKind] = ["openai", "anthropic", "google"]


@pytest.mark.parametrize("kind", KINDS)
def test_an_endpoint_on_loopback_is_refused_before_connecting_unless_allowed(
    kind: ProviderKind,
    fake_llm: FakeProviderServer,
    make_provider: MakeProvider,
    settings: Any,
    sleeps: list[float],
) -> None:
    settings.AGENTDESK_LLM_PRIVATE_NETWORKS = []
    provider = make_provider(kind, sleep=sleeps.append)

    with pytest.raises(LLMConfigurationError) as caught:
        provider.complete([Message.user("hi")])

    message = str(caught.value)
    assert "127.0.0.1 is a loopback address" in message
    assert "AGENTDESK_LLM_PRIVATE_NETWORKS" in message
    assert caught.value.attempts == 1  # a configuration error: not retried
    assert sleeps == []
    assert fake_llm.request_count == 0

    settings.AGENTDESK_LLM_PRIVATE_NETWORKS = ["127.0.0.1/32"]
    fake_llm.enqueue(text_reply("allowed now"))
    assert provider.complete([Message.user("hi")]).text == "allowed now"


def test_a_host_name_is_checked_by_every_address_it_resolves_to(
    fake_llm: FakeProviderServer, make_provider: MakeProvider, settings: Any
) -> None:
    settings.AGENTDESK_LLM_PRIVATE_NETWORKS = []
    port = fake_llm.openai_base_url.split(":")[2].split("/")[0]
    provider = make_provider("openai", base_url=f"http://localhost:{port}/v1", max_retries=0)

    with pytest.raises(LLMConfigurationError, match=r"localhost \((127\.0\.0\.1|::1)\) is a"):
        provider.complete([Message.user("hi")])
    assert fake_llm.request_count == 0


@pytest.mark.parametrize("kind", KINDS)
def test_a_metadata_address_is_refused_even_inside_an_allowed_network(
    kind: ProviderKind, make_provider: MakeProvider, settings: Any
) -> None:
    settings.AGENTDESK_LLM_PRIVATE_NETWORKS = ["169.254.0.0/16"]
    provider = make_provider(kind, base_url="http://169.254.169.254/latest", timeout=2.0)

    with pytest.raises(LLMConfigurationError, match="cloud metadata address"):
        provider.complete([Message.user("hi")])


def test_the_checked_address_is_the_one_dialled_and_the_name_is_kept(
    fake_llm: FakeProviderServer, settings: Any
) -> None:
    """Resolved once, checked, then connected to: a DNS answer cannot change in between."""
    settings.AGENTDESK_LLM_PRIVATE_NETWORKS = ["127.0.0.0/8"]
    port = int(fake_llm.openai_base_url.split(":")[2].split("/")[0])
    lookups: list[str] = []

    def resolver(host: str, _port: int) -> list[str]:
        lookups.append(host)
        return ["127.0.0.1"]

    with http_client(httpx2.Client, "http://llm.agency.test", resolver=resolver) as client:
        response = client.get(f"http://llm.agency.test:{port}/healthz")

    assert response.json() == {"status": "ok"}
    assert lookups == ["llm.agency.test"]


def test_one_disallowed_address_in_a_dns_answer_refuses_the_endpoint(
    fake_llm: FakeProviderServer, settings: Any
) -> None:
    settings.AGENTDESK_LLM_PRIVATE_NETWORKS = ["127.0.0.0/8"]
    port = int(fake_llm.openai_base_url.split(":")[2].split("/")[0])

    def mixed(_host: str, _port: int) -> list[str]:
        return ["127.0.0.1", "10.1.2.3"]

    with (
        http_client(httpx2.Client, "http://llm.agency.test", resolver=mixed) as client,
        pytest.raises(EndpointRefused, match=r"10\.1\.2\.3\) is a private address"),
    ):
        client.get(f"http://llm.agency.test:{port}/healthz")
    assert fake_llm.request_count == 0


def test_the_platforms_own_endpoint_is_not_restricted(
    fake_llm: FakeProviderServer, settings: Any
) -> None:
    """No base URL on the row: the SDK's host or the operator's OPENAI_BASE_URL, trusted."""
    settings.AGENTDESK_LLM_PRIVATE_NETWORKS = []
    with http_client(httpx2.Client, None) as client:
        assert client.get(f"{fake_llm.openai_base_url[:-3]}/healthz").json() == {"status": "ok"}


@pytest.mark.parametrize("kind", KINDS)
def test_the_environments_proxies_are_not_used_for_an_agencys_endpoint(
    kind: ProviderKind,
    fake_llm: FakeProviderServer,
    make_provider: MakeProvider,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A proxy would fetch whatever address the tenant named, past the check."""
    for variable in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(variable, "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    fake_llm.enqueue(text_reply("straight to the endpoint"))
    provider = make_provider(kind, max_retries=0)

    assert provider.complete([Message.user("hi")]).text == "straight to the endpoint"

    settings.AGENTDESK_LLM_PRIVATE_NETWORKS = []
    with pytest.raises(LLMConfigurationError, match="loopback"):
        make_provider(kind, max_retries=0).complete([Message.user("hi")])


def test_the_platforms_openai_organization_and_project_are_not_sent_to_an_agencys_endpoint(
    fake_llm: FakeProviderServer, make_provider: MakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_ORG_ID", "org-PLATFORM")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-PLATFORM")
    fake_llm.enqueue(text_reply("one"), text_reply("two"))

    make_provider("openai").complete([Message.user("hi")])
    make_provider("openai", organization="org-agency").complete([Message.user("hi")])

    first, second = fake_llm.requests
    assert "openai-organization" not in first.headers
    assert "openai-project" not in first.headers
    assert second.headers["openai-organization"] == "org-agency"
    assert "openai-project" not in second.headers


# Google's SDK reads no headers from the environment: nothing of the platform's to refuse.
@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_an_agencys_endpoint_is_refused_while_the_environment_sets_custom_headers(
    kind: ProviderKind,
    fake_llm: FakeProviderServer,
    make_provider: MakeProvider,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    variable = "ANTHROPIC_CUSTOM_HEADERS" if kind == "anthropic" else "OPENAI_CUSTOM_HEADERS"
    monkeypatch.setenv(variable, "X-Gateway-Token: platform-secret")

    with pytest.raises(LLMConfigurationError, match=variable):
        make_provider(kind).complete([Message.user("hi")])
    assert fake_llm.request_count == 0


class _TricklingServer:
    """Answers any request with headers, then one body byte every 0.1 s for 10 s: no read
    timeout ever trips. Records whether the client hung up before the end."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.client_left_early = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        connection, _ = self.listener.accept()
        with connection:
            received = b""
            while b"\r\n\r\n" not in received:
                received += connection.recv(65536)
            connection.sendall(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"
            )
            try:
                for _ in range(99):
                    time.sleep(0.1)
                    connection.sendall(b" ")
            except OSError:
                self.client_left_early.set()

    def close(self) -> None:
        self.listener.close()


@pytest.mark.parametrize("kind", KINDS)
def test_an_agencys_endpoint_cannot_stretch_a_call_past_its_time_limit_by_trickling(
    kind: ProviderKind, make_provider: MakeProvider
) -> None:
    """Bytes now and then never trip a read timeout (here 30 s): the call's limit cuts them."""
    server = _TricklingServer()
    base = f"http://127.0.0.1:{server.port}"
    provider = make_provider(
        kind, base_url=base if kind == "anthropic" else f"{base}/v1", timeout=30.0, max_retries=0
    )
    try:
        with pytest.raises(LLMDeadlineExceeded):
            provider.complete([Message.user("hi")], timeout=0.5)
        provider.close()  # the pooled connection, if the client kept it
        assert server.client_left_early.wait(5)
    finally:
        server.close()
