"""Who may read ``/metrics``: a client presenting the bearer token
(``AGENTDESK_METRICS_TOKEN``), or, without a token, one whose address is allowed
(``AGENTDESK_METRICS_ALLOWED_IPS``: addresses or networks, loopback by default).

The address is the connection's (``REMOTE_ADDR``): a proxy in front of the web server makes every
client its own address, so behind one use the token (or allow only the proxy's scraper network).
"""

from __future__ import annotations

import functools
import hmac
import ipaddress
from dataclasses import dataclass
from enum import Enum

from django.conf import settings
from django.http import HttpRequest

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class Verdict(Enum):
    ALLOWED = "allowed"
    BAD_TOKEN = "bad_token"  # noqa: S105 - a verdict's name, not a secret. 401: a credential was presented and it is wrong
    NOT_ALLOWED = "not_allowed"  # 401 when a token would do, else 403


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    token_configured: bool


@functools.cache
def _networks(entries: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(entry.strip(), strict=False) for entry in entries if entry)


def _address_allowed(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in net for net in _networks(tuple(settings.AGENTDESK_METRICS_ALLOWED_IPS)))


def decide(request: HttpRequest) -> Decision:
    return decide_for(
        authorization=request.headers.get("Authorization", ""),
        address=request.META.get("REMOTE_ADDR", ""),
    )


def decide_for(*, authorization: str, address: str) -> Decision:
    """The same rules for a server that is not Django's (a worker pod's, ops.metrics.pod_server):
    the ``Authorization`` header as sent ("" when none) and the connection's address."""
    token = settings.AGENTDESK_METRICS_TOKEN
    if authorization:
        scheme, _, presented = authorization.partition(" ")
        good = (
            bool(token)
            and scheme.lower() == "bearer"
            and hmac.compare_digest(presented.strip().encode(), token.encode())
        )
        return Decision(Verdict.ALLOWED if good else Verdict.BAD_TOKEN, bool(token))
    if _address_allowed(address):
        return Decision(Verdict.ALLOWED, bool(token))
    return Decision(Verdict.NOT_ALLOWED, bool(token))
