"""``AGENTDESK_LLM_PRIVATE_ENDPOINTS``: one non-public server let through by address and port
(how `manage.py up` lets agencies reach its demo model), nothing else at that address."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from agents.llm.endpoints import EndpointRefused, checked_addresses
from agents.llm.types import LLMConfigurationError, Message
from devkit.fake_server import FakeProviderServer, text_reply
from tests.agents.llm.helpers import MakeProvider


def test_an_allowed_endpoint_is_reachable_and_its_address_on_other_ports_is_not(
    fake_llm: FakeProviderServer, make_provider: MakeProvider, settings: Any
) -> None:
    settings.AGENTDESK_LLM_PRIVATE_NETWORKS = []
    settings.AGENTDESK_LLM_PRIVATE_ENDPOINTS = [f"127.0.0.1:{fake_llm.port}"]
    fake_llm.enqueue(text_reply("through"))

    assert make_provider("openai").complete([Message.user("hi")]).text == "through"
    assert checked_addresses("127.0.0.1", fake_llm.port) == ["127.0.0.1"]
    with pytest.raises(EndpointRefused, match="AGENTDESK_LLM_PRIVATE_ENDPOINTS"):
        checked_addresses("127.0.0.1", 6379)  # Redis, say
    with pytest.raises(EndpointRefused):
        checked_addresses("127.0.0.2", fake_llm.port)  # the same port elsewhere on loopback
    other = make_provider("openai", base_url=f"http://127.0.0.1:{fake_llm.port + 1}/v1")
    with pytest.raises(LLMConfigurationError, match="loopback"):
        other.complete([Message.user("hi")])


def test_a_metadata_address_is_refused_even_when_listed(settings: Any) -> None:
    settings.AGENTDESK_LLM_PRIVATE_NETWORKS = []
    settings.AGENTDESK_LLM_PRIVATE_ENDPOINTS = ["169.254.169.254:80"]

    with pytest.raises(EndpointRefused, match="metadata"):
        checked_addresses("169.254.169.254", 80)


@pytest.mark.parametrize("value", ["localhost:8765", "127.0.0.1", "127.0.0.1:http"])
def test_an_endpoint_that_is_not_an_address_and_port_is_a_configuration_error(
    settings: Any, value: str
) -> None:
    settings.AGENTDESK_LLM_PRIVATE_ENDPOINTS = [value]

    with pytest.raises(ImproperlyConfigured, match="AGENTDESK_LLM_PRIVATE_ENDPOINTS"):
        checked_addresses("127.0.0.1", 8765)


def test_an_ipv6_endpoint_is_written_in_brackets(settings: Any) -> None:
    settings.AGENTDESK_LLM_PRIVATE_NETWORKS = []
    settings.AGENTDESK_LLM_PRIVATE_ENDPOINTS = ["[::1]:8765"]

    assert checked_addresses("::1", 8765) == ["::1"]
