"""Where the MCP client may connect: public addresses, or what a superuser allowed.

The policy is ``web_scrape``'s (:func:`tools.net.addresses.refusal_reason`: private, loopback,
link-local, multicast, reserved, CGNAT, ULA and embedded-IPv4 forms refused; cloud metadata
addresses always). The exceptions are the rows of
:class:`tools.mcp.models.McpAllowedAddress` (an address or network, on one port or any), which
only superusers can write.

The check runs inside the HTTP stack, on every connection, against the address actually dialled:
the host is resolved once, every address must pass (a mixed DNS answer is an attack, not a
fallback), and the connection goes to a checked address, so a DNS answer that changes in between
cannot slip past it. TLS still verifies the server's own name (httpcore passes it separately).

Plain http is for allow-listed addresses only (a server on the operator's own network): to any
other host it would send the stored headers (an ``Authorization`` token) unencrypted. And every
byte the server sends counts against the call's :class:`ByteBudget`, so that a hostile server
cannot stream an unbounded answer (the SDK reads whole JSON replies, and SSE events without end)
into the worker's memory.
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from ipaddress import ip_address, ip_network
from typing import Any

import anyio
import httpcore2

from tools.mcp.models import McpAllowedAddress
from tools.net.addresses import IPAddress, IPNetwork, Resolver, refusal_reason, system_resolver

__all__ = [
    "AddressRefused",
    "AllowedAddress",
    "ByteBudget",
    "CheckedBackend",
    "ResponseTooLarge",
    "allowed_addresses",
    "check",
]


class AddressRefused(Exception):
    """Raised before connecting; the client reports it as ``blocked_address``."""


class ResponseTooLarge(Exception):
    """The server sent more than the call's budget; the client reports ``response_too_large``."""


class ByteBudget:
    """The bytes one call may receive, over all its connections."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.exceeded = False

    def spend(self, count: int) -> None:
        self.used += count
        if self.used > self.limit:
            self.exceeded = True
            raise ResponseTooLarge(
                f"The MCP server's answer is larger than the limit of {self.limit:,} bytes."
            )


@dataclass(frozen=True)
class AllowedAddress:
    network: IPNetwork
    port: int | None = None  # None: any port


def allowed_addresses() -> tuple[AllowedAddress, ...]:
    """The superuser's allow-list, read now (platform rows: no tenant needed)."""
    rows = McpAllowedAddress.objects.values_list("network", "port")
    return tuple(AllowedAddress(ip_network(net.strip(), strict=False), port) for net, port in rows)


def check(
    host: str,
    port: int,
    allowed: Sequence[AllowedAddress],
    resolver: Resolver,
    *,
    plain_http: bool = False,
) -> list[str]:
    """``host``'s addresses, every one of them allowed; raises :class:`AddressRefused`. For
    ``plain_http`` every address must be on the allow-list (a public one is refused too)."""
    try:
        addresses: list[IPAddress] = [ip_address(host.strip("[]"))]
    except ValueError:
        try:
            addresses = [ip_address(a.split("%")[0]) for a in resolver(host, port)]
        except (OSError, UnicodeError, ValueError) as exc:
            raise AddressRefused(f"Cannot resolve the MCP server's host {host}: {exc}.") from None
    if not addresses:
        raise AddressRefused(f"The MCP server's host {host} has no address.")
    networks = [a.network for a in allowed if a.port is None or a.port == port]
    for ip in addresses:
        reason = refusal_reason(ip, networks)
        shown = host if host == str(ip) else f"{host} ({ip})"
        if reason is None and plain_http and not _listed(ip, networks):
            raise AddressRefused(
                f"Refused to connect to the MCP server at {shown}:{port} over plain http: the "
                "headers would go unencrypted. Use an https URL (plain http is only for "
                "addresses a superuser allowed)."
            )
        if reason is None:
            continue
        raise AddressRefused(
            f"Refused to connect to the MCP server at {shown}:{port}: it is {reason}. A "
            "superuser can allow it (admin: MCP allowed private addresses)."
        )
    return [str(ip) for ip in addresses]


def _listed(ip: IPAddress, networks: Sequence[IPNetwork]) -> bool:
    return any(ip in net for net in networks if net.version == ip.version)


class _CountedStream(httpcore2.AsyncNetworkStream):
    """A connection whose received bytes are spent from a :class:`ByteBudget`."""

    def __init__(self, inner: httpcore2.AsyncNetworkStream, budget: ByteBudget) -> None:
        self._inner = inner
        self._budget = budget

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data = await self._inner.read(max_bytes, timeout)
        self._budget.spend(len(data))
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        tls = await self._inner.start_tls(ssl_context, server_hostname, timeout)
        return _CountedStream(tls, self._budget)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class CheckedBackend(httpcore2.AsyncNetworkBackend):
    """httpcore's network backend, dialling only checked addresses (only allow-listed ones for
    ``plain_http``), and counting what they send against ``budget``."""

    def __init__(
        self,
        inner: httpcore2.AsyncNetworkBackend,
        allowed: Sequence[AllowedAddress],
        resolver: Resolver = system_resolver,
        *,
        plain_http: bool = False,
        budget: ByteBudget | None = None,
    ) -> None:
        self._inner = inner
        self._allowed = tuple(allowed)
        self._resolver = resolver
        self._plain_http = plain_http
        self._budget = budget

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        # getaddrinfo blocks: a thread, abandoned if the call's time runs out.
        addresses = await anyio.to_thread.run_sync(
            functools.partial(check, plain_http=self._plain_http),
            host,
            port,
            self._allowed,
            self._resolver,
            abandon_on_cancel=True,
        )
        failure: Exception | None = None
        for address in addresses:  # like socket.create_connection: the first that answers
            try:
                stream = await self._inner.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                failure = exc
                continue
            return stream if self._budget is None else _CountedStream(stream, self._budget)
        assert failure is not None  # check() never returns an empty list
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        raise AddressRefused("The MCP client connects over TCP only.")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)
