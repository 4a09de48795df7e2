"""The request loop of :func:`fetch`: pinned hops, manual redirects, streamed size-capped body."""

from __future__ import annotations

import contextlib
import functools
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from tools.net.addresses import IPNetwork, Resolver, pin_url, system_resolver
from tools.net.body import Body, read_body
from tools.net.deadline import resolver_with_deadline, transport_with_deadline
from tools.net.errors import FetchError
from tools.net.html_text import decode_body, html_to_text

USER_AGENT = "AgentDesk-WebScrape/1.0"
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_TEXT_TYPES = frozenset({"application/json", "application/xml", "application/javascript"})


@dataclass(frozen=True, slots=True)
class FetchResult:
    final_url: str  # after redirects
    status: int
    content_type: str  # media type without parameters, e.g. "text/html"
    title: str
    text: str
    truncated: bool  # the body or the text was cut at its limit


@functools.cache
def _default_ssl_context() -> ssl.SSLContext:
    """The CA store every fetch verifies against, loaded once per process: a client per hop
    would otherwise load the whole bundle each time (~24 ms of CPU). Made as httpx makes its
    default, without the environment (``trust_env=False``, like the client)."""
    return httpx.create_ssl_context(trust_env=False)


def _content(
    response: httpx.Response, body: Body, *, url: str, max_text_chars: int
) -> tuple[str, str, str, bool]:
    media = response.headers.get("content-type", "").split(";")[0].strip().lower()
    is_html = media in _HTML_TYPES or (not media and body.data.lstrip()[:1] == b"<")
    is_text = media.startswith("text/") or media in _TEXT_TYPES or media.endswith(("+json", "+xml"))
    if media and not (is_html or is_text):
        msg = f"{url} is {media}, not a web page or text."
        raise FetchError("unsupported_content", msg, url=url)
    decoded = decode_body(body.data, response.charset_encoding, is_html=is_html)
    title, text = html_to_text(decoded) if is_html else ("", decoded.strip())
    media = media or ("text/html" if is_html else "text/plain")
    return media, title, text[:max_text_chars], body.truncated or len(text) > max_text_chars


def _timeout(url: str) -> FetchError:
    return FetchError("timeout", f"Fetching {url} took too long.", url=url)


def fetch(
    url: str,
    *,
    timeout_s: float = 15.0,
    max_bytes: int = 2_000_000,
    max_text_chars: int = 50_000,
    max_redirects: int = 5,
    truncate: bool = True,
    resolver: Resolver = system_resolver,
    allowed_private_networks: Sequence[IPNetwork] = (),
    ssl_context: ssl.SSLContext | None = None,
) -> FetchResult:
    """GET ``url`` safely and return its readable text; raise :class:`FetchError` otherwise.

    ``truncate``: past ``max_bytes``, keep the first part (True) or raise ``too_large`` (False).
    HTTP statuses >= 400 raise ``http_error`` (with ``status``). ``resolver``,
    ``allowed_private_networks`` and ``ssl_context`` (extra trusted CAs) exist for tests against
    loopback servers; the tool leaves them at their defaults.
    """
    deadline = time.monotonic() + timeout_s
    resolver = resolver_with_deadline(resolver, deadline)
    try:
        current = httpx.URL(url.strip())
    except httpx.InvalidURL as exc:
        raise FetchError("bad_url", f"Invalid URL {url!r}: {exc}.", url=url) from None
    for hop in range(max_redirects + 1):
        shown = str(current)
        pinned = pin_url(
            current, resolver=resolver, allowed_private_networks=allowed_private_networks
        )
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _timeout(shown)
        headers = {
            "Host": current.netloc.decode("ascii"),
            "User-Agent": USER_AGENT,
            "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5",
            "Accept-Encoding": "identity",  # a compressed answer anyway: see tools.net.body
        }
        extensions = {"sni_hostname": current.raw_host.decode("ascii")}
        try:
            # A new client per hop: a pooled TLS connection must never serve another host name.
            # trust_env=False: an HTTP(S)_PROXY from the environment would bypass the pinning.
            # httpx's Timeout bounds each operation; the transport's network backend is what
            # ends connect, TLS, headers and body at the deadline (tools.net.deadline).
            transport = transport_with_deadline(
                deadline, verify=ssl_context or _default_ssl_context()
            )
            with httpx.Client(
                transport=transport,
                follow_redirects=False,
                trust_env=False,
                timeout=httpx.Timeout(remaining),
            ) as client:
                request = client.build_request(
                    "GET", pinned, headers=headers, extensions=extensions
                )
                with contextlib.closing(client.send(request, stream=True)) as response:
                    location = response.headers.get("location")
                    if response.status_code in _REDIRECTS and location:
                        if hop == max_redirects:
                            msg = f"{url} redirected more than {max_redirects} times."
                            raise FetchError("too_many_redirects", msg, url=shown)
                        current = current.join(location)
                        continue
                    if response.status_code >= 400:
                        msg = f"{shown} answered HTTP {response.status_code}."
                        raise FetchError("http_error", msg, url=shown, status=response.status_code)
                    body = read_body(response, max_bytes=max_bytes, truncate=truncate, url=shown)
        except httpx.TimeoutException:
            raise _timeout(shown) from None
        except httpx.InvalidURL as exc:  # a Location header httpx cannot use
            raise FetchError(
                "bad_url", f"{shown} redirected to a bad URL: {exc}.", url=shown
            ) from None
        except httpx.HTTPError as exc:
            if time.monotonic() >= deadline:
                raise _timeout(shown) from None
            raise FetchError("http_error", f"Fetching {shown} failed: {exc}.", url=shown) from None
        media, title, text, truncated = _content(
            response, body, url=shown, max_text_chars=max_text_chars
        )
        return FetchResult(shown, response.status_code, media, title, text, truncated)
    raise AssertionError("unreachable: every hop returns, raises or continues")
