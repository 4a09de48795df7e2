"""Calls to an agency's OpenID Connect issuer: discovery, its keys, the token request.

Every call obeys the product's private-address refusal (tools.net: the host is resolved once,
every address must be public, and the connection goes to the checked address), except the
networks in ``AGENTDESK_SSO_PRIVATE_NETWORKS``; plain http is accepted only for an issuer in
those networks. No redirect is followed, no proxy from the environment is used, and each call
has one total time limit (``AGENTDESK_SSO_TIMEOUT_SECONDS``) and a size limit.
"""

from __future__ import annotations

import contextlib
import json
import ssl
import time
from dataclasses import dataclass
from ipaddress import ip_address, ip_network
from typing import Any

import httpx
from django.conf import settings

from tools.net import FetchError, IPNetwork, pin_url
from tools.net.addresses import system_resolver
from tools.net.deadline import resolver_with_deadline, transport_with_deadline

MAX_BYTES = 512_000  # a discovery document or key set is a few kB


class IssuerError(Exception):
    """The issuer could not be used; the message says why (shown on the refusal page)."""


@dataclass(frozen=True)
class Endpoints:
    """What the issuer's ``/.well-known/openid-configuration`` names."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    userinfo_endpoint: str | None


def private_networks() -> list[IPNetwork]:
    return [ip_network(net, strict=False) for net in settings.AGENTDESK_SSO_PRIVATE_NETWORKS]


def _request(method: str, url: str, **kwargs: Any) -> Any:
    """``method`` ``url`` at a checked address; the JSON body of a 2xx answer."""
    deadline = time.monotonic() + settings.AGENTDESK_SSO_TIMEOUT_SECONDS
    allowed = private_networks()
    try:
        target = httpx.URL(url)
        pinned = pin_url(
            target,
            resolver=resolver_with_deadline(system_resolver, deadline),
            allowed_private_networks=allowed,
        )
    except (FetchError, httpx.InvalidURL) as exc:
        raise IssuerError(f"{url}: {exc}") from None
    if target.scheme != "https" and not any(ip_address(pinned.host) in net for net in allowed):
        raise IssuerError(f"{url}: the issuer must be reached over https.")
    auth = kwargs.pop("auth", None)
    headers = {"Host": target.netloc.decode("ascii"), "Accept": "application/json"}
    headers.update(kwargs.pop("headers", None) or {})
    try:
        with httpx.Client(
            transport=transport_with_deadline(deadline, verify=ssl.create_default_context()),
            follow_redirects=False,
            trust_env=False,
            timeout=httpx.Timeout(settings.AGENTDESK_SSO_TIMEOUT_SECONDS),
        ) as client:
            request = client.build_request(
                method,
                pinned,
                headers=headers,
                extensions={"sni_hostname": target.raw_host.decode("ascii")},
                **kwargs,
            )
            response = client.send(request, auth=auth, stream=True)
            with contextlib.closing(response):
                body = b""
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > MAX_BYTES:
                        raise IssuerError(f"{url}: the answer is larger than {MAX_BYTES} bytes.")
    except httpx.HTTPError as exc:
        raise IssuerError(f"{url}: {exc.__class__.__name__}: {exc}") from None
    if not 200 <= response.status_code < 300:
        raise IssuerError(f"{url} answered HTTP {response.status_code}.")
    try:
        return json.loads(body)
    except ValueError:
        raise IssuerError(f"{url} did not answer JSON.") from None


def discover(issuer: str) -> Endpoints:
    """The issuer's endpoints, from its discovery document, which must name the same issuer."""
    document = _request("GET", issuer.rstrip("/") + "/.well-known/openid-configuration")
    if not isinstance(document, dict):
        raise IssuerError("The discovery document is not a JSON object.")
    if document.get("issuer") != issuer:
        raise IssuerError(
            f"The discovery document names the issuer {document.get('issuer')!r}, not {issuer!r}."
        )
    try:
        return Endpoints(
            issuer=issuer,
            authorization_endpoint=str(document["authorization_endpoint"]),
            token_endpoint=str(document["token_endpoint"]),
            jwks_uri=str(document["jwks_uri"]),
            userinfo_endpoint=document.get("userinfo_endpoint"),
        )
    except KeyError as exc:
        raise IssuerError(f"The discovery document has no {exc.args[0]}.") from None


def get_json(url: str, *, bearer: str | None = None) -> Any:
    headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
    return _request("GET", url, headers=headers)


def post_form(url: str, data: dict[str, str], *, auth: tuple[str, str] | None) -> Any:
    return _request("POST", url, data=data, auth=auth)
