"""A webhook receiver on 127.0.0.1 for the outbound tests: each request is recorded and answered
by the next of a script of behaviours (then the last one again): an HTTP status, or ``HANG``
(hold the request until :meth:`Receiver.release`, or a few seconds). ``hang_type``: the first
request whose body is an event of that type is held, whatever the script says."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HANG = "hang"
HANG_LIMIT_SECONDS = 20


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


class Receiver:
    def __init__(self, *script: int | str, hang_type: str = "") -> None:
        self.script: list[int | str] = list(script) or [200]
        self.hang_type = hang_type
        self.received: list[Received] = []
        self.hanging = threading.Event()  # a request is being held
        self._released = threading.Event()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/hook"

    def release(self) -> None:
        self._released.set()

    def _next(self) -> int | str:
        with self._lock:
            return self.script.pop(0) if len(self.script) > 1 else self.script[0]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                with receiver._lock:
                    receiver.received.append(
                        Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                    )
                behaviour = receiver._next()
                if receiver.hang_type and f'"type":"{receiver.hang_type}"'.encode() in body:
                    with receiver._lock:
                        behaviour, receiver.hang_type = HANG, ""
                if behaviour == HANG:
                    receiver.hanging.set()
                    receiver._released.wait(HANG_LIMIT_SECONDS)
                    behaviour = 200
                answer = b'{"ok": true}' if behaviour == 200 else b"receiver says no"
                try:
                    self.send_response(int(behaviour))
                    self.send_header("Content-Length", str(len(answer)))
                    self.end_headers()
                    self.wfile.write(answer)
                except OSError:
                    pass  # the sender gave up waiting

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler

    @contextmanager
    def running(self) -> Iterator[Receiver]:
        thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.release()
            self._server.shutdown()
            self._server.server_close()
