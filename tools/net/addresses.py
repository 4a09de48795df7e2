"""Which addresses may be contacted, resolving a URL's host and pinning the checked address."""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network

import httpx

from tools.net.errors import FetchError

IPAddress = IPv4Address | IPv6Address
IPNetwork = IPv4Network | IPv6Network
Resolver = Callable[[str, int], Sequence[str]]  # (host, port) -> IP address strings

# AWS/GCP/Azure/OpenStack, AWS over IPv6, Alibaba, AWS ECS task metadata: never, whatever is let
# through for tests.
METADATA_ADDRESSES = frozenset(
    ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200", "169.254.170.2")
)
_CGNAT = ip_network("100.64.0.0/10")
_NAT64 = ip_network("64:ff9b::/96")
_IPV4_COMPATIBLE = ip_network("::/96")


def system_resolver(host: str, port: int) -> list[str]:
    """Every address the system resolver gives for ``host`` (IPv4 and IPv6)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _embedded_ipv4(ip: IPv6Address) -> IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64:
        return IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_block_reason(ip: IPAddress) -> str | None:
    """Why ``ip`` must not be contacted, or None for a public unicast address."""
    if ip in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if isinstance(ip, IPv6Address):
        inner = _embedded_ipv4(ip)
        if inner is not None:
            reason = address_block_reason(inner)
            return None if reason is None else f"{reason} (embedded in an IPv6 address)"
        if ip in _IPV4_COMPATIBLE and not (ip.is_loopback or ip.is_unspecified):
            return "a deprecated IPv4-compatible IPv6 address"
        if ip.is_site_local:
            return "a site-local address"
    checks = (
        (ip.is_unspecified, "an unspecified address"),
        (ip.is_loopback, "a loopback address"),
        (ip.is_link_local, "a link-local address"),
        (ip.is_multicast, "a multicast address"),
        (isinstance(ip, IPv4Address) and ip in _CGNAT, "a shared (CGNAT) address"),
        (ip.is_private, "a private address"),
        (ip.is_reserved, "a reserved address"),
        (not ip.is_global, "not a public address"),
    )
    return next((reason for hit, reason in checks if hit), None)


def refusal_reason(ip: IPAddress, allowed: Sequence[IPNetwork]) -> str | None:
    """Why ``ip`` must not be contacted given the non-public networks let through
    (``allowed``), or None. Metadata addresses are refused whatever is allowed."""
    reason = address_block_reason(ip)
    if reason is None or (
        ip not in METADATA_ADDRESSES
        and any(ip in net for net in allowed if net.version == ip.version)
    ):
        return None
    return reason


def _check_ip(ip: IPAddress, host: str, allowed: Sequence[IPNetwork]) -> None:
    reason = refusal_reason(ip, allowed)
    if reason is None:
        return
    shown = host if host == str(ip) else f"{host} ({ip})"
    raise FetchError("blocked_address", f"Refused to fetch {shown}: {reason}.", url=host)


def pin_url(
    url: httpx.URL, *, resolver: Resolver, allowed_private_networks: Sequence[IPNetwork] = ()
) -> httpx.URL:
    """Check ``url`` and return it with its host replaced by the checked address.

    Raises :class:`FetchError` (``bad_scheme``, ``bad_url``, ``dns_error``, ``blocked_address``)
    before anything is sent. Every resolved address must pass: a mixed answer is an attack, not a
    fallback. ``allowed_private_networks`` lets non-public networks through (tests on loopback);
    metadata addresses are refused regardless.
    """
    if url.scheme not in ("http", "https"):
        raise FetchError("bad_scheme", f"Only http and https URLs can be fetched, not {url}.")
    if url.userinfo:
        raise FetchError("bad_url", "URLs with a user name or password cannot be fetched.")
    host = url.raw_host.decode("ascii")
    if not host:
        raise FetchError("bad_url", f"The URL {url} has no host name.")
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        addresses = [ip_address(host)]
    except ValueError:
        try:
            answers = resolver(host, port)
            addresses = [ip_address(a.split("%")[0]) for a in answers]  # drop an IPv6 zone id
        except (OSError, UnicodeError, ValueError) as exc:
            msg = f"Cannot resolve host {host}: {exc}."
            raise FetchError("dns_error", msg, url=str(url)) from None
    if not addresses:
        raise FetchError("dns_error", f"Host {host} has no address.", url=str(url))
    for ip in addresses:
        _check_ip(ip, host, allowed_private_networks)
    return url.copy_with(host=str(addresses[0]))
