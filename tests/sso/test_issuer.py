"""Calls to an issuer (sso.issuer) obey the private-address refusal: a private, loopback or
metadata issuer is refused before anything is sent unless AGENTDESK_SSO_PRIVATE_NETWORKS lets it
through, plain http only there; a discovery document naming another issuer is refused."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from sso import issuer
from tests.sso.stub import discovery, stub_issuer

DISCOVERY = "/o/.well-known/openid-configuration"


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("https://10.1.2.3/realms/a", "a private address"),
        ("https://169.254.169.254/latest", "a cloud metadata address"),
        ("https://[::1]/o", "a loopback address"),
    ],
)
def test_an_issuer_at_a_non_public_address_is_refused(url: str, why: str) -> None:
    with pytest.raises(issuer.IssuerError, match=why):
        issuer.discover(url)


def test_loopback_is_refused_unless_the_setting_lets_it_through() -> None:
    with (
        stub_issuer({}) as base,
        override_settings(AGENTDESK_SSO_PRIVATE_NETWORKS=[]),
        pytest.raises(issuer.IssuerError, match="a loopback address"),
    ):
        issuer.discover(base)


def test_a_public_issuer_over_plain_http_is_refused_before_connecting() -> None:
    with pytest.raises(issuer.IssuerError, match="must be reached over https"):
        issuer.discover("http://93.184.215.14/o")


def test_discovery_gives_the_endpoints_of_the_issuer_it_names() -> None:
    documents: dict[str, Any] = {}
    with stub_issuer(documents) as base:
        documents[DISCOVERY] = discovery(base + "/o")
        found = issuer.discover(base + "/o")
    assert (found.token_endpoint, found.jwks_uri) == (f"{base}/o/token/", f"{base}/o/jwks.json")


def test_a_discovery_document_naming_another_issuer_is_refused() -> None:
    documents: dict[str, Any] = {}
    with stub_issuer(documents) as base:
        documents[DISCOVERY] = discovery(base + "/o", named="https://login.example.com/o")
        with pytest.raises(issuer.IssuerError, match="names the issuer"):
            issuer.discover(base + "/o")
