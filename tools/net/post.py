"""A safe HTTP POST (outbound webhooks): the same address policy and total time limit as
:func:`tools.net.fetch`, one hop only.

The URL's host is resolved once, every address must be public (or in
``allowed_private_networks``, for tests on loopback), and the request goes to that checked
address with the original ``Host`` and SNI: a DNS answer that changes after the check cannot send
it elsewhere. Redirects are not followed (a webhook receiver answers, it does not move: a 3xx is
the answer). The answer's body is read up to ``max_response_bytes`` (the rest is dropped), for
a delivery log.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import httpx

from tools.net.addresses import IPNetwork, Resolver, pin_url, system_resolver
from tools.net.client import _default_ssl_context
from tools.net.deadline import resolver_with_deadline, transport_with_deadline
from tools.net.errors import FetchError


@dataclass(frozen=True, slots=True)
class PostResult:
    status: int
    body: bytes  # at most max_response_bytes of it
    truncated: bool


def post(
    url: str,
    *,
    content: bytes,
    headers: Mapping[str, str],
    timeout_s: float = 15.0,
    max_response_bytes: int = 4096,
    resolver: Resolver = system_resolver,
    allowed_private_networks: Sequence[IPNetwork] = (),
) -> PostResult:
    """POST ``content`` to ``url``; any HTTP answer is returned (its status is the caller's to
    judge), anything else raises :class:`FetchError` (``bad_url``, ``bad_scheme``,
    ``blocked_address``, ``dns_error``, ``timeout``, ``http_error`` for a failed connection)."""
    deadline = time.monotonic() + timeout_s
    try:
        target = httpx.URL(url.strip())
    except httpx.InvalidURL as exc:
        raise FetchError("bad_url", f"Invalid URL {url!r}: {exc}.", url=url) from None
    pinned = pin_url(
        target,
        resolver=resolver_with_deadline(resolver, deadline),
        allowed_private_networks=allowed_private_networks,
    )
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise FetchError("timeout", f"Posting to {url} took too long.", url=url)
    sent = {**headers, "Host": target.netloc.decode("ascii")}
    extensions = {"sni_hostname": target.raw_host.decode("ascii")}
    try:
        transport = transport_with_deadline(deadline, verify=_default_ssl_context())
        with httpx.Client(
            transport=transport,
            follow_redirects=False,
            trust_env=False,  # a proxy from the environment would bypass the pinning
            timeout=httpx.Timeout(remaining),
        ) as client:
            request = client.build_request(
                "POST", pinned, content=content, headers=sent, extensions=extensions
            )
            with contextlib.closing(client.send(request, stream=True)) as response:
                body = bytearray()
                truncated = False
                for chunk in response.iter_raw():
                    body.extend(chunk)
                    if len(body) > max_response_bytes:
                        truncated = True
                        break
                return PostResult(response.status_code, bytes(body[:max_response_bytes]), truncated)
    except httpx.TimeoutException:
        raise FetchError("timeout", f"Posting to {url} took too long.", url=url) from None
    except httpx.HTTPError as exc:
        if time.monotonic() >= deadline:
            raise FetchError("timeout", f"Posting to {url} took too long.", url=url) from None
        raise FetchError("http_error", f"Posting to {url} failed: {exc}.", url=url) from None
