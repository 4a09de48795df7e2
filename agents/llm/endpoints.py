"""Where an SDK client may connect when an agency chose the endpoint.

An agency's LLM provider row may carry its own ``api_endpoint`` (an OpenAI-compatible gateway, a
vLLM, an Ollama): a URL a tenant typed, which the worker then POSTs to. Left unchecked, that is a
server-side request to wherever the tenant likes — the cloud metadata service, the platform's own
Redis or admin ports — with the reply's text shown back in the run's error. So the HTTP client of
such a configuration connects only to public addresses, or to the networks the operator lists in
``AGENTDESK_LLM_PRIVATE_NETWORKS`` (their own model servers), or to the exact address and port
listed in ``AGENTDESK_LLM_PRIVATE_ENDPOINTS``; cloud metadata addresses never.

The check runs inside the HTTP stack, on every new connection, against the address actually
connected to (the host is resolved once and the checked address is the one dialled, so a DNS
answer that changes in between cannot slip past it), and therefore on redirects too. TLS still
verifies the endpoint's own name: the HTTP library passes it for SNI and certificate checks.
The address policy is the one ``web_scrape`` enforces (:mod:`tools.net.addresses`).

Nothing of the platform's goes there either: the platform's API key never does (``factory``), no
proxy from the environment is used (the check must see the endpoint itself), the SDKs' headers
from the environment (``OPENAI_ORG_ID``, ``OPENAI_PROJECT_ID``) are left out, and a client for
such an endpoint is refused while ``*_CUSTOM_HEADERS`` is set.

Endpoints the platform chose (the SDK's default host, or the operator's ``OPENAI_BASE_URL`` /
``ANTHROPIC_BASE_URL``) are not restricted.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
from ipaddress import ip_address, ip_network
from typing import Any

import httpcore2
import httpx2
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from agents.llm.before_send import request_hook
from agents.llm.deadline import BoundedStream, connect_timeout
from agents.llm.errors import LLMConfigurationError
from agents.llm.tls import shared_ssl_context
from tools.net.addresses import (
    IPAddress,
    IPNetwork,
    Resolver,
    refusal_reason,
    system_resolver,
)

SETTING = "AGENTDESK_LLM_PRIVATE_NETWORKS"
# Exact addresses with their port ("127.0.0.1:8765"): one non-public server, not its whole
# network (``manage.py up`` lets agencies reach its demo model this way, nothing else on loopback).
ENDPOINTS_SETTING = "AGENTDESK_LLM_PRIVATE_ENDPOINTS"


class EndpointRefused(Exception):
    """Raised in the HTTP stack before connecting; the providers report it as a configuration
    error (not retried)."""


def refusal(exc: BaseException) -> EndpointRefused | None:
    """The :class:`EndpointRefused` behind an SDK's connection error, if that was the cause."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, EndpointRefused):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


@functools.cache
def _parse_networks(values: tuple[str, ...]) -> tuple[IPNetwork, ...]:
    try:
        return tuple(ip_network(value.strip(), strict=False) for value in values if value.strip())
    except ValueError as exc:
        raise ImproperlyConfigured(f"{SETTING}: {exc}") from exc


def allowed_private_networks() -> tuple[IPNetwork, ...]:
    # Read on every connection (cheap: parsed once per value) so that a changed setting applies
    # to clients built before it.
    return _parse_networks(tuple(getattr(settings, SETTING, ())))


@functools.cache
def _parse_endpoints(values: tuple[str, ...]) -> frozenset[tuple[IPAddress, int]]:
    endpoints: set[tuple[IPAddress, int]] = set()
    for value in (v.strip() for v in values):
        if not value:
            continue
        host, _, port = value.rpartition(":")
        try:
            endpoints.add((ip_address(host.strip("[]")), int(port)))
        except ValueError as exc:
            raise ImproperlyConfigured(
                f"{ENDPOINTS_SETTING}: {value!r} is not an IP address and port "
                "(e.g. 127.0.0.1:8765, [::1]:8765)"
            ) from exc
    return frozenset(endpoints)


def allowed_private_endpoints() -> frozenset[tuple[IPAddress, int]]:
    return _parse_endpoints(tuple(getattr(settings, ENDPOINTS_SETTING, ())))


def checked_addresses(host: str, port: int, *, resolver: Resolver = system_resolver) -> list[str]:
    """``host``'s addresses, every one of them allowed; raises :class:`EndpointRefused` if any
    is not (a mixed DNS answer is an attack, not a fallback)."""
    try:
        addresses: list[IPAddress] = [ip_address(host)]
    except ValueError:
        # An OSError here (no such host) is a connection failure like any other: retried.
        addresses = [ip_address(a.split("%")[0]) for a in resolver(host, port)]
    allowed = allowed_private_networks()
    endpoints = allowed_private_endpoints()
    for ip in addresses:
        # An allowed endpoint is its address alone, and only on its port; metadata addresses
        # stay refused (refusal_reason).
        exact = (ip_network(ip),) if (ip, port) in endpoints else ()
        reason = refusal_reason(ip, (*allowed, *exact))
        if reason is None:
            continue
        shown = host if host == str(ip) else f"{host} ({ip})"
        raise EndpointRefused(
            f"The LLM provider's API endpoint {shown} is {reason}: an agency's own endpoint must "
            f"be a public address, unless the platform operator allows its network in {SETTING} "
            f"(or this address and port in {ENDPOINTS_SETTING})."
        )
    return [str(ip) for ip in addresses]


class _AllowedAddressesOnly(httpcore2.SyncBackend):
    """httpcore's network backend, dialling only checked addresses; the connections it opens
    end each operation by the current model call's deadline (:mod:`agents.llm.deadline`)."""

    def __init__(self, resolver: Resolver = system_resolver) -> None:
        self._resolver = resolver

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.NetworkStream:
        addresses = checked_addresses(host, port, resolver=self._resolver)
        failure: Exception | None = None
        for address in addresses:  # like socket.create_connection: the first that answers
            try:
                stream = super().connect_tcp(
                    address, port, connect_timeout(timeout), local_address, socket_options
                )
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                failure = exc
            else:
                return BoundedStream(stream)
        assert failure is not None  # a resolver answer is never empty
        raise failure


def http_client(
    client_class: type[httpx2.Client],
    base_url: str | None,
    *,
    resolver: Resolver = system_resolver,
) -> httpx2.Client:
    """The HTTP client for an SDK (its ``DefaultHttpxClient``, which carries the SDK's limits
    and timeouts), sharing the process's SSL context and running the caller's hook before a
    call's request goes out (:mod:`agents.llm.before_send`); restricted as above when
    ``base_url`` is the agency's own."""
    hooks = {"request": [request_hook]}
    if base_url is None:
        return client_class(verify=shared_ssl_context(), event_hooks=hooks)
    client = client_class(verify=shared_ssl_context(), trust_env=False, event_hooks=hooks)
    pool = getattr(getattr(client, "_transport", None), "_pool", None)
    # httpx offers no public way to give its connection pool a network backend; the pool reads
    # this attribute for every connection it opens. Fail loudly if an upgrade moved it, rather
    # than run without the check.
    if not isinstance(pool, httpcore2.ConnectionPool) or not hasattr(pool, "_network_backend"):
        raise RuntimeError("Cannot restrict the LLM client's connections: httpx2 changed")
    pool._network_backend = _AllowedAddressesOnly(resolver)
    # No proxy: the address check must see the endpoint itself. trust_env=False is not enough:
    # Anthropic's client mounts the environment's proxies itself.
    if not isinstance(getattr(client, "_mounts", None), dict):
        raise RuntimeError("Cannot drop the LLM client's proxies: httpx2 changed")
    client._mounts = {}
    return client


def refuse_environment_headers(variable: str) -> None:
    """The SDKs add the headers named in ``OPENAI_CUSTOM_HEADERS`` / ``ANTHROPIC_CUSTOM_HEADERS``
    (a platform's gateway token, say) to every request, and may let them replace the key: an
    agency's endpoint must not receive them. Raises while such a variable is set."""
    if os.environ.get(variable) is not None:
        raise LLMConfigurationError(
            f"The platform's environment sets {variable}, whose headers the SDK would send to "
            "this agency's own API endpoint: unset it, or clear the agency's endpoint."
        )
