"""A safe HTTP GET for the ``web_scrape`` tool: no request ever reaches a non-public address.

Each hop (the URL, then every redirect, at most ``max_redirects``) is resolved once, **every**
resolved address must be public, and the connection goes to that checked address: the request is
sent to ``scheme://<ip>:<port>`` with the original ``Host`` header and, for https, the original
name as SNI and for certificate verification (httpcore's ``sni_hostname`` extension). A DNS answer
that changes between the check and the connection (rebinding) therefore cannot redirect it, and
no connection is reused across hops. Refused: private, loopback, link-local, multicast, reserved,
unspecified, shared (CGNAT 100.64/10), IPv6 ULA/link-local/site-local, IPv4 addresses embedded in
IPv6 (mapped, 6to4, NAT64) that are any of these, and cloud metadata addresses.

Limits: a total time over the whole fetch (name resolution, connect, TLS, headers and body of
every hop: each network operation gets only the time left, so a slow-drip server cannot stretch
it), a maximum body size counted after decoding (streamed; cut or refused; gzip is inflated only
up to it, other content codings are refused), a maximum text length. HTML becomes readable text
(title + text, no scripts or styles) with the standard library's parser.

Modules: ``addresses`` (the address policy and pinning), ``deadline`` (the total time limit),
``body`` (the size-capped, decoded body), ``html_text`` (decoding, HTML to text), ``client`` (the
request loop), ``post`` (a POST to one checked address: outbound webhooks), ``errors``.
"""

from tools.net.addresses import (
    METADATA_ADDRESSES,
    IPAddress,
    IPNetwork,
    Resolver,
    address_block_reason,
    pin_url,
    system_resolver,
)
from tools.net.client import FetchResult, fetch
from tools.net.errors import FetchError, FetchErrorCode
from tools.net.html_text import html_to_text
from tools.net.post import PostResult, post

__all__ = [
    "METADATA_ADDRESSES",
    "FetchError",
    "FetchErrorCode",
    "FetchResult",
    "IPAddress",
    "IPNetwork",
    "PostResult",
    "Resolver",
    "address_block_reason",
    "fetch",
    "html_to_text",
    "pin_url",
    "post",
    "system_resolver",
]
