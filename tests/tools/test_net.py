"""The web_scrape fetcher: blocked addresses are refused before any connection; pinning; limits.

Network rule for these tests: the only target is the loopback server from ``netserver``. Blocked
addresses are never contacted; a process-wide audit hook records every ``socket.connect`` and
``getaddrinfo`` during a test so the tests can prove it.
"""

from __future__ import annotations

import socket
import ssl
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from ipaddress import ip_address, ip_network
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.tools.netserver import BIG_SIZE, Seen, make_pki, serve
from tools.net import FetchError, address_block_reason, fetch, html_to_text

LOOPBACK = [ip_network("127.0.0.0/8")]


@dataclass
class _Recorder:
    active: bool = False
    connects: list[Any] = field(default_factory=list)
    lookups: list[Any] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


_RECORDER = _Recorder()


class NonLoopbackConnect(RuntimeError):
    pass


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if not _RECORDER.active or event not in ("socket.connect", "socket.getaddrinfo"):
        return
    with _RECORDER.lock:
        if event == "socket.getaddrinfo":
            _RECORDER.lookups.append(args[0])
            return
        address = args[1]
        _RECORDER.connects.append(address)
    if isinstance(address, tuple) and not ip_address(address[0]).is_loopback:
        # Raising from an audit hook aborts the connect: even a regression in the fetcher cannot
        # send a packet anywhere but loopback from these tests.
        raise NonLoopbackConnect(f"test tried to connect to {address}")


sys.addaudithook(_audit)  # cannot be removed; does nothing outside the `network` fixture


@pytest.fixture(autouse=True)
def network() -> Iterator[_Recorder]:
    """Records the process's outgoing connections (address tuples) and name lookups (hosts);
    refuses any connection to a non-loopback address."""
    _RECORDER.connects.clear()
    _RECORDER.lookups.clear()
    _RECORDER.active = True
    yield _RECORDER
    _RECORDER.active = False


@pytest.fixture
def server() -> Iterator[tuple[int, Seen]]:
    with serve() as running:
        yield running


def resolve_to(*addresses: str) -> Any:
    calls: list[tuple[str, int]] = []

    def resolver(host: str, port: int) -> list[str]:
        calls.append((host, port))
        return list(addresses)

    resolver.calls = calls  # type: ignore[attr-defined]
    return resolver


def _fetch_error(url: str, **kwargs: Any) -> FetchError:
    with pytest.raises(FetchError) as excinfo:
        fetch(url, **kwargs)
    return excinfo.value


# --- refused before any connection ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "resolver"),
    [
        ("http://127.0.0.1:{port}/page", None),
        ("http://localhost:{port}/page", None),  # the system resolver: 127.0.0.1 and/or ::1
        ("http://[::1]:{port}/page", None),
        ("http://0.0.0.0:{port}/page", None),
        ("http://10.0.0.1/", None),
        ("http://169.254.169.254/latest/meta-data/", None),
        ("http://[fd00:ec2::254]/latest/meta-data/", None),
        ("http://[::ffff:127.0.0.1]:{port}/page", None),
        ("http://[::ffff:169.254.169.254]/", None),
        ("http://2130706433:{port}/page", None),  # 127.0.0.1 as an integer
        ("http://100.64.0.1/", None),
        ("http://192.168.1.1/", None),
        ("http://172.16.0.1/", None),
        ("http://224.0.0.1/", None),
        ("http://[fe80::1]/", None),
        ("http://[fc00::1]/", None),
        ("http://internal.test:{port}/page", ("127.0.0.1",)),
        ("https://intranet.test/", ("10.1.2.3",)),
        ("http://mixed.test/", ("93.184.216.34", "10.0.0.1")),  # one bad answer spoils all
    ],
)
def test_non_public_addresses_are_refused_before_connecting(
    network: _Recorder,
    server: tuple[int, Seen],
    url: str,
    resolver: tuple[str, ...] | None,
) -> None:
    port, seen = server
    kwargs: dict[str, Any] = {} if resolver is None else {"resolver": resolve_to(*resolver)}
    error = _fetch_error(url.format(port=port), **kwargs)
    assert error.code == "blocked_address"
    assert "Refused to fetch" in str(error)
    assert network.connects == []
    assert seen.requests == []


def test_metadata_addresses_stay_blocked_even_when_link_local_is_allowed(
    network: _Recorder,
) -> None:
    error = _fetch_error(
        "http://169.254.169.254/", allowed_private_networks=[ip_network("169.254.0.0/16")]
    )
    assert (error.code, "metadata" in str(error)) == ("blocked_address", True)
    assert network.connects == []


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("ftp://127.0.0.1/file", "bad_scheme"),
        ("file:///etc/passwd", "bad_scheme"),
        ("javascript:alert(1)", "bad_scheme"),
        ("http://user:secret@example.test/", "bad_url"),
        ("http:///nohost", "bad_url"),
    ],
)
def test_bad_urls_are_refused(network: _Recorder, url: str, code: str) -> None:
    assert _fetch_error(url).code == code
    assert network.connects == []


def test_a_resolver_failure_is_a_dns_error(network: _Recorder) -> None:
    def failing(host: str, port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    error = _fetch_error("http://nowhere.test/", resolver=failing)
    assert error.code == "dns_error"
    assert "nowhere.test" in str(error)
    assert _fetch_error("http://empty.test/", resolver=resolve_to()).code == "dns_error"
    assert network.connects == []


@pytest.mark.parametrize(
    ("address", "blocked"),
    [
        ("8.8.8.8", False),
        ("2606:4700:4700::1111", False),
        ("::ffff:8.8.8.8", False),
        ("2002:a00:1::", True),  # 6to4 wrapping 10.0.0.1
        ("64:ff9b::a00:1", True),  # NAT64 wrapping 10.0.0.1
        ("64:ff9b::808:808", False),
        ("::8.8.8.8", True),  # deprecated IPv4-compatible form
        ("fec0::1", True),
        ("ff02::1", True),
        ("240.0.0.1", True),
        ("255.255.255.255", True),
        ("198.18.0.1", True),
        ("100.100.100.200", True),
    ],
)
def test_address_block_reason(address: str, blocked: bool) -> None:
    assert (address_block_reason(ip_address(address)) is not None) is blocked


# --- the positive path on the loopback server -----------------------------------------------------


def test_fetches_a_page_as_title_and_text(server: tuple[int, Seen]) -> None:
    port, seen = server
    result = fetch(f"http://127.0.0.1:{port}/page", allowed_private_networks=LOOPBACK)
    assert (result.status, result.content_type, result.truncated) == (200, "text/html", False)
    assert result.final_url == f"http://127.0.0.1:{port}/page"
    assert result.title == "Acme & Co"
    assert result.text == "Welcome\n\nWe sell anvils.\n\n- Strong\n\n- Cheap"
    assert seen.requests == [("/page", f"127.0.0.1:{port}")]


def test_the_checked_address_is_pinned_and_the_host_header_kept(
    network: _Recorder, server: tuple[int, Seen]
) -> None:
    """The name is resolved once, by our resolver; the connection goes to that address; a
    resolver that would answer differently later (DNS rebinding) is never asked again."""
    port, seen = server
    answers = iter(["127.0.0.1", "10.0.0.1", "10.0.0.1"])
    calls: list[str] = []

    def rebinding(host: str, port: int) -> list[str]:
        calls.append(host)
        return [next(answers)]

    result = fetch(
        f"http://shop.test:{port}/echo-host", resolver=rebinding, allowed_private_networks=LOOPBACK
    )
    assert result.text == f"shop.test:{port}"
    assert calls == ["shop.test"]
    assert seen.requests == [("/echo-host", f"shop.test:{port}")]
    assert network.connects == [("127.0.0.1", port)]
    assert "shop.test" not in network.lookups  # httpx never resolved the name itself


def test_https_uses_the_host_name_for_sni_and_certificate_checks(
    tmp_path: Path, network: _Recorder
) -> None:
    pki = make_pki(tmp_path, "secure.test")
    with serve(tls=pki.server_context) as (port, seen):
        result = fetch(
            f"https://secure.test:{port}/echo-host",
            resolver=resolve_to("127.0.0.1"),
            allowed_private_networks=LOOPBACK,
            ssl_context=pki.client_context,
        )
        assert result.text == f"secure.test:{port}"
        assert seen.sni == ["secure.test"]
        assert network.connects == [("127.0.0.1", port)]

        # The certificate is checked against the name, not the pinned IP: another name fails.
        error = _fetch_error(
            f"https://other.test:{port}/echo-host",
            resolver=resolve_to("127.0.0.1"),
            allowed_private_networks=LOOPBACK,
            ssl_context=pki.client_context,
        )
        assert error.code == "http_error"
        assert seen.requests == [("/echo-host", f"secure.test:{port}")]


def test_without_a_context_of_its_own_every_fetch_verifies_against_one_shared_ca_store(
    tmp_path: Path, network: _Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loaded once per process: a client per hop would load the CA bundle each time (~24 ms)."""
    pki = make_pki(tmp_path, "secure.test")
    verify: list[object] = []
    original = httpx.HTTPTransport.__init__

    def recording(self: httpx.HTTPTransport, *args: Any, **kwargs: Any) -> None:
        verify.append(kwargs.get("verify"))
        original(self, *args, **kwargs)

    monkeypatch.setattr(httpx.HTTPTransport, "__init__", recording)
    with serve(tls=pki.server_context) as (port, seen):
        for _ in range(2):
            error = _fetch_error(
                f"https://secure.test:{port}/echo-host",
                resolver=resolve_to("127.0.0.1"),
                allowed_private_networks=LOOPBACK,
            )
            # The test's CA is not in the default store: the certificate check ran and failed.
            assert "CERTIFICATE_VERIFY_FAILED" in str(error)
        assert seen.requests == []
    assert len(verify) == 2
    assert isinstance(verify[0], ssl.SSLContext)
    assert verify[0] is verify[1]
    assert verify[0].verify_mode == ssl.CERT_REQUIRED


# --- redirects ------------------------------------------------------------------------------------


def test_relative_redirects_are_followed(server: tuple[int, Seen]) -> None:
    port, seen = server
    result = fetch(f"http://127.0.0.1:{port}/chain/5", allowed_private_networks=LOOPBACK)
    assert result.final_url == f"http://127.0.0.1:{port}/page"
    assert result.title == "Acme & Co"
    assert len(seen.requests) == 6  # five redirects, then the page


def test_more_than_five_redirects_are_refused(server: tuple[int, Seen]) -> None:
    port, seen = server
    error = _fetch_error(f"http://127.0.0.1:{port}/chain/6", allowed_private_networks=LOOPBACK)
    assert error.code == "too_many_redirects"
    assert len(seen.requests) == 6
    loop = _fetch_error(f"http://127.0.0.1:{port}/loop", allowed_private_networks=LOOPBACK)
    assert loop.code == "too_many_redirects"


def test_a_redirect_to_the_metadata_address_is_blocked(
    network: _Recorder, server: tuple[int, Seen]
) -> None:
    port, seen = server
    error = _fetch_error(
        f"http://127.0.0.1:{port}/redirect-to?http://169.254.169.254/latest/meta-data/",
        allowed_private_networks=LOOPBACK,
    )
    assert error.code == "blocked_address"
    assert len(seen.requests) == 1
    assert network.connects == [("127.0.0.1", port)]  # nothing after the redirect


@pytest.mark.parametrize(
    ("location", "code"),
    [
        ("ftp://127.0.0.1/file", "bad_scheme"),
        ("file:///etc/passwd", "bad_scheme"),
        ("http://:99999/", "bad_url"),
        ("http://[::1]/", "blocked_address"),
        ("http://0xa000001/", "blocked_address"),  # 10.0.0.1 in hex, via the system resolver
        ("http://012.0.0.1/", "http_error"),  # httpx itself rejects the Location header
    ],
)
def test_every_redirect_target_is_checked(
    network: _Recorder, server: tuple[int, Seen], location: str, code: str
) -> None:
    port, seen = server
    error = _fetch_error(
        f"http://127.0.0.1:{port}/redirect-to?{location}", allowed_private_networks=LOOPBACK
    )
    assert error.code == code
    assert len(seen.requests) == 1
    assert network.connects == [("127.0.0.1", port)]


def test_a_redirect_to_a_name_resolving_to_a_private_address_is_blocked(
    network: _Recorder, server: tuple[int, Seen]
) -> None:
    port, _seen = server
    addresses = {"start.test": "127.0.0.1", "evil.test": "10.0.0.1"}
    error = _fetch_error(
        f"http://start.test:{port}/redirect-to?http://evil.test/",
        resolver=lambda host, _port: [addresses[host]],
        allowed_private_networks=LOOPBACK,
    )
    assert error.code == "blocked_address"
    assert "evil.test (10.0.0.1)" in str(error)
    assert network.connects == [("127.0.0.1", port)]


# --- limits and content ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/big", "/big-unsized"])
def test_a_large_body_is_cut_at_max_bytes(server: tuple[int, Seen], path: str) -> None:
    port, _seen = server
    result = fetch(
        f"http://127.0.0.1:{port}{path}", max_bytes=10_000, allowed_private_networks=LOOPBACK
    )
    assert result.truncated
    assert len(result.text) == 10_000
    full = fetch(
        f"http://127.0.0.1:{port}{path}",
        max_bytes=BIG_SIZE,
        max_text_chars=BIG_SIZE,
        allowed_private_networks=LOOPBACK,
    )
    assert (full.truncated, len(full.text)) == (False, BIG_SIZE)


@pytest.mark.parametrize("path", ["/big", "/big-unsized"])
def test_a_large_body_is_refused_when_truncation_is_off(
    server: tuple[int, Seen], path: str
) -> None:
    port, _seen = server
    error = _fetch_error(
        f"http://127.0.0.1:{port}{path}",
        max_bytes=10_000,
        truncate=False,
        allowed_private_networks=LOOPBACK,
    )
    assert error.code == "too_large"


def test_text_is_cut_at_max_text_chars(server: tuple[int, Seen]) -> None:
    port, _seen = server
    result = fetch(
        f"http://127.0.0.1:{port}/page", max_text_chars=7, allowed_private_networks=LOOPBACK
    )
    assert (result.text, result.truncated) == ("Welcome", True)


def test_a_slow_drip_server_hits_the_total_time_limit(server: tuple[int, Seen]) -> None:
    port, _seen = server
    error = _fetch_error(
        f"http://127.0.0.1:{port}/slow", timeout_s=0.5, allowed_private_networks=LOOPBACK
    )
    assert error.code == "timeout"


def test_a_server_dripping_its_headers_hits_the_total_time_limit(
    server: tuple[int, Seen],
) -> None:
    """The limit covers the headers too, not only the body: the fetch gives up long before the
    server's 5 s of header lines (ten times the limit) are out; the server notes when it sent
    them all."""
    port, seen = server
    error = _fetch_error(
        f"http://127.0.0.1:{port}/drip-headers", timeout_s=0.5, allowed_private_networks=LOOPBACK
    )
    assert error.code == "timeout"
    assert seen.requests == [("/drip-headers", f"127.0.0.1:{port}")]
    assert seen.finished == []  # the fetch returned before the last header line was sent


def test_name_resolution_counts_against_the_total_time_limit(network: _Recorder) -> None:
    """``getaddrinfo`` has no timeout: the fetch stops waiting for a stuck resolver at the
    deadline instead of holding the worker until the resolver gives up."""
    release = threading.Event()
    answered: list[str] = []

    def stuck(host: str, port: int) -> list[str]:
        release.wait(timeout=5)
        answered.append(host)
        return ["127.0.0.1"]

    try:
        error = _fetch_error(
            "http://slow-dns.test/",
            resolver=stuck,
            timeout_s=0.3,
            allowed_private_networks=LOOPBACK,
        )
        assert (error.code, "slow-dns.test" in str(error)) == ("timeout", True)
        assert answered == []  # returned while the resolver was still stuck
    finally:
        release.set()
    assert network.connects == []


def test_gzip_bodies_are_decoded_but_never_past_max_bytes(server: tuple[int, Seen]) -> None:
    """Some servers gzip whatever was asked. The bomb inflates to 1 MB and then turns corrupt: a
    decoder that inflated more than max_bytes (+1) would reach the corruption and fail."""
    port, _seen = server
    page = fetch(f"http://127.0.0.1:{port}/gzip-page", allowed_private_networks=LOOPBACK)
    assert (page.title, page.text) == (
        "Acme & Co",
        "Welcome\n\nWe sell anvils.\n\n- Strong\n\n- Cheap",
    )

    bomb = f"http://127.0.0.1:{port}/gzip-bomb"
    cut = fetch(bomb, max_bytes=10_000, allowed_private_networks=LOOPBACK)
    assert (cut.text, cut.truncated) == ("a" * 10_000, True)
    refused = _fetch_error(
        bomb, max_bytes=10_000, truncate=False, allowed_private_networks=LOOPBACK
    )
    assert refused.code == "too_large"
    # Allowed to inflate past the first 1 MB, the decoder meets the corruption: a clear error.
    corrupt = _fetch_error(bomb, max_bytes=2 * BIG_SIZE, allowed_private_networks=LOOPBACK)
    assert (corrupt.code, "corrupt gzip body" in str(corrupt)) == ("http_error", True)


@pytest.mark.parametrize("coding", ["br", "zstd", "deflate", "compress", "gzip,br", "br,gzip"])
def test_content_codings_other_than_gzip_are_refused(server: tuple[int, Seen], coding: str) -> None:
    """httpx would decode br, zstd and deflate a whole network read at a time, unbounded."""
    port, _seen = server
    error = _fetch_error(
        f"http://127.0.0.1:{port}/encoded?{coding}", allowed_private_networks=LOOPBACK
    )
    assert error.code == "unsupported_encoding"
    assert coding in str(error)


def test_http_errors_carry_the_status(server: tuple[int, Seen]) -> None:
    port, _seen = server
    error = _fetch_error(f"http://127.0.0.1:{port}/missing", allowed_private_networks=LOOPBACK)
    assert (error.code, error.status) == ("http_error", 404)


def test_binary_content_is_refused(server: tuple[int, Seen]) -> None:
    port, _seen = server
    error = _fetch_error(f"http://127.0.0.1:{port}/image", allowed_private_networks=LOOPBACK)
    assert error.code == "unsupported_content"
    assert "image/png" in str(error)


@pytest.mark.parametrize(
    ("path", "content_type", "title", "text"),
    [
        ("/json", "application/json", "", '{"ok": true}'),
        ("/latin1", "text/plain", "", "café crème"),
        ("/meta-charset", "text/html", "Prix", "5 €"),
    ],
)
def test_text_types_and_charsets(
    server: tuple[int, Seen], path: str, content_type: str, title: str, text: str
) -> None:
    port, _seen = server
    result = fetch(f"http://127.0.0.1:{port}{path}", allowed_private_networks=LOOPBACK)
    assert (result.content_type, result.title, result.text) == (content_type, title, text)


def test_html_to_text_drops_scripts_styles_and_hidden_content() -> None:
    title, text = html_to_text(
        "<title>T</title><svg><text>chart</text></svg><template><p>tpl</p></template>"
        "<p>Visible&nbsp;text</p><iframe>frame</iframe><div>A<br>B</div>"
        "<script>if (a < b) { x = '</p>' }</script><style>p{}</style>"
    )
    assert title == "T"
    assert text == "Visible text\n\nA\nB"  # &nbsp; is whitespace too
