"""A real HTTP(S) server on 127.0.0.1 for the web_scrape fetcher's tests, plus a test CA.

The only network target of these tests: every route is served from this machine's loopback.
"""

from __future__ import annotations

import datetime as dt
import gzip
import ssl
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

PAGE = b"""<!doctype html><html><head><title>  Acme &amp; Co  </title>
<style>body { color: red }</style><script>var secret = "do-not-show";</script></head>
<body><h1>Welcome</h1><p>We sell <b>anvils</b>.</p><ul><li>Strong</li><li>Cheap</li></ul>
<noscript>enable js</noscript></body></html>"""
META_CHARSET_PAGE = '<html><head><meta charset="windows-1252"><title>Prix</title></head><p>5 €</p>'
BIG_SIZE = 1_000_000
DRIP_LINES = 50  # /drip-headers: one header line every 0.1 s, 5 s in all


def _gzip_bomb() -> bytes:
    """~1 KB of gzip that inflates to 1 MB of "a", then a deflate block of the reserved type:
    a decoder that inflates past the first 1 MB fails on it."""
    compressor = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
    inflates = compressor.compress(b"a" * BIG_SIZE) + compressor.flush(zlib.Z_SYNC_FLUSH)
    return inflates + b"\x07" + b"\0" * 64  # BFINAL=1, BTYPE=11 (reserved): "invalid block type"


@dataclass
class Seen:
    """What the server received: one (path, Host header) per request, and TLS SNI names; the
    paths of the slow answers it sent to the end (the client waited for all of it)."""

    requests: list[tuple[str, str]] = field(default_factory=list)
    sni: list[str | None] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        pass  # keep test output clean

    def _send(self, status: int, body: bytes, content_type: str, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def _redirect(self, location: str) -> None:
        self._send(302, b"", "text/plain", Location=location)

    def _stream(self, chunks: int, chunk: bytes, pause: float, length: int | None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        if length is None:  # the size is only known while reading
            self.send_header("Connection", "close")
        else:
            self.send_header("Content-Length", str(length))
        self.end_headers()
        try:
            for _ in range(chunks):
                self.wfile.write(chunk)
                self.wfile.flush()
                time.sleep(pause)
        except OSError:
            pass  # the client hung up, as it should

    def _drip_headers(self) -> None:
        try:
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n")
            for line in range(DRIP_LINES):
                self.wfile.write(f"X-Drip-{line}: {line}\r\n".encode())
                time.sleep(0.1)
            self.wfile.write(b"Content-Length: 2\r\nConnection: close\r\n\r\nok")
        except OSError:
            return  # the client hung up, as it should
        with self.server.seen.lock:
            self.server.seen.finished.append(self.path)

    def do_GET(self) -> None:
        with self.server.seen.lock:
            self.server.seen.requests.append((self.path, self.headers.get("Host", "")))
        path = self.path
        if path in _STATIC:
            self._send(*_STATIC[path])
        elif path in _GZIPPED:
            self._send(*_GZIPPED[path], Content_Encoding="gzip")
        elif path == "/echo-host":
            self._send(200, self.headers.get("Host", "").encode(), "text/plain")
        elif path == "/big-unsized":
            self._stream(BIG_SIZE // 10_000, b"b" * 10_000, 0, None)
        elif path == "/slow":  # a slow-drip server: a byte every 50 ms, for at most 5 s
            self._stream(100, b"x", 0.05, 100)
        elif path == "/drip-headers":  # a slow-drip server that never finishes its headers
            self._drip_headers()
        elif path.startswith("/encoded?"):  # a body that claims the given Content-Encoding
            self._send(200, b"<p>compressed?</p>", "text/html", Content_Encoding=path[9:])
        elif path.startswith("/redirect-to?"):
            self._redirect(path.split("?", 1)[1])
        elif path.startswith("/chain/"):
            left = int(path.rsplit("/", 1)[1])
            self._redirect(f"/chain/{left - 1}" if left > 1 else "/page")  # left redirects
        elif path == "/loop":
            self._redirect("/loop")
        else:
            self._send(404, b"no such route", "text/plain")


_STATIC: dict[str, tuple[int, bytes, str]] = {
    "/page": (200, PAGE, "text/html; charset=utf-8"),
    "/big": (200, b"a" * BIG_SIZE, "text/plain"),
    "/latin1": (200, "café crème".encode("latin-1"), "text/plain; charset=iso-8859-1"),
    "/meta-charset": (200, META_CHARSET_PAGE.encode("cp1252"), "text/html"),
    "/json": (200, b'{"ok": true}', "application/json"),
    "/image": (200, b"\x89PNG\r\n\x1a\n" + b"\0" * 100, "image/png"),
    "/missing": (404, b"<h1>Not found</h1>", "text/html"),
}
# Sent with Content-Encoding: gzip, whatever the request accepted (as some servers do).
_GZIPPED: dict[str, tuple[int, bytes, str]] = {
    "/gzip-page": (200, gzip.compress(PAGE), "text/html; charset=utf-8"),
    "/gzip-bomb": (200, _gzip_bomb(), "text/plain"),
}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    seen: Seen


@contextmanager
def serve(tls: ssl.SSLContext | None = None) -> Iterator[tuple[int, Seen]]:
    """Run the server on 127.0.0.1 (an ephemeral port) in a thread; yield (port, seen)."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.seen = Seen()
    if tls is not None:

        def record_sni(_sock: ssl.SSLObject, name: str | None, _ctx: ssl.SSLContext) -> None:
            server.seen.sni.append(name)

        tls.sni_callback = record_sni
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield server.server_address[1], server.seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@dataclass(frozen=True)
class TestPKI:
    server_context: ssl.SSLContext  # presents a certificate for ``hostname``
    client_context: ssl.SSLContext  # trusts only the test CA
    hostname: str


def make_pki(directory: Path, hostname: str) -> TestPKI:
    """A throw-away CA and a leaf certificate for ``hostname`` only (no IP address SAN)."""
    now = dt.datetime.now(dt.UTC)

    def build(
        subject: str,
        issuer: str,
        key: ec.EllipticCurvePrivateKey,
        signer: ec.EllipticCurvePrivateKey,
        *,
        ca: bool,
    ) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
            # Python 3.13 verifies with VERIFY_X509_STRICT, which requires the key identifiers.
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(signer.public_key()),
                critical=False,
            )
        )
        if ca:
            builder = builder.add_extension(
                x509.KeyUsage(
                    digital_signature=True, key_cert_sign=True, crl_sign=True,
                    content_commitment=False, key_encipherment=False, data_encipherment=False,
                    key_agreement=False, encipher_only=False, decipher_only=False,
                ),
                critical=True,
            )  # fmt: skip
        else:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.DNSName(hostname)]), critical=False
            )
        return builder.sign(signer, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = build("AgentDesk test CA", "AgentDesk test CA", ca_key, ca_key, ca=True)
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    leaf_cert = build(hostname, "AgentDesk test CA", leaf_key, ca_key, ca=False)

    cert_file, key_file = directory / "leaf.pem", directory / "leaf.key"
    cert_file.write_bytes(leaf_cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        leaf_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert_file, key_file)
    client_context = ssl.create_default_context(
        cadata=ca_cert.public_bytes(serialization.Encoding.PEM).decode()
    )
    return TestPKI(server_context, client_context, hostname)
