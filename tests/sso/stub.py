"""A stub issuer on 127.0.0.1 that answers fixed JSON documents (discovery only: the real
provider of the end-to-end tests is tests/sso/provider/)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@contextmanager
def stub_issuer(documents: dict[str, Any]) -> Iterator[str]:
    """Serve ``documents`` (path -> JSON) at ``http://127.0.0.1:<port>``; yields that base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps(documents.get(self.path, {})).encode()
            self.send_response(200 if self.path in documents else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def discovery(issuer: str, *, named: str | None = None) -> dict[str, Any]:
    return {
        "issuer": named or issuer,
        "authorization_endpoint": f"{issuer}/authorize/",
        "token_endpoint": f"{issuer}/token/",
        "jwks_uri": f"{issuer}/jwks.json",
    }
