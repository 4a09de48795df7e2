"""A real HTTP server on loopback that the real `openai`, `anthropic` and `google-genai` clients
talk to."""

from __future__ import annotations

import json
import socket
import socketserver
import threading
import uuid
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, cast
from urllib.parse import urlsplit

from devkit.fake_server import embeddings, google_request, google_wire, wire
from devkit.fake_server.conversation import order_error
from devkit.fake_server.script import (
    Hang,
    HttpError,
    RawReply,
    RecordedRequest,
    Reply,
    Responder,
    Script,
    Step,
    Wire,
)

_ROUTES: dict[str, Wire] = {"/v1/chat/completions": "openai", "/v1/messages": "anthropic"}
SCRIPT_HEADER = "x-fake-script"


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # Benchmarks open hundreds of connections at once; the default backlog of 5 would drop SYNs.
    request_queue_size = 1024
    fake: FakeProviderServer

    def server_bind(self) -> None:
        # HTTPServer.server_bind resolves the host's FQDN, which can stall on machines without DNS.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like the real APIs; the SDKs pool connections

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; without this, Nagle + delayed ACK add ~40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    @property
    def fake(self) -> FakeProviderServer:
        return cast(_HTTPServer, self.server).fake

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests assert on recorded requests, not on stderr."""

    def do_GET(self) -> None:
        if urlsplit(self.path).path == "/healthz":
            self._send_json(200, {"status": "ok"})
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        if path == embeddings.PATH:
            self._embeddings(path, raw)
            return
        route = _ROUTES.get(path)
        if route is None and google_request.match(path) is not None:
            route = "google"  # /v1beta/models/{model}:generateContent or :streamGenerateContent
        if route is None:
            self._send_json(404, {"error": {"message": f"the fake provider has no route {path}"}})
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send_json(400, wire.error_body(route, HttpError(400, message="body is not JSON")))
            return
        headers = {name.lower(): value for name, value in self.headers.items()}
        request, step = self.fake.handle(route, path, headers, body)
        self.fake.track_in_flight(+1)
        try:
            self._answer(request, step)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (its timeout); nothing to answer
        finally:
            self.fake.track_in_flight(-1)

    def _embeddings(self, path: str, raw: bytes) -> None:
        """OpenAI's embeddings: deterministic vectors (fake_server/embeddings.py), unless a script
        registered for the request (its ``x-fake-script`` header or its model) has a step queued:
        an error, a hang or a raw body, as for chat."""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send_json(
                400, wire.error_body("openai", HttpError(400, message="body is not JSON"))
            )
            return
        headers = {name.lower(): value for name, value in self.headers.items()}
        request, step = self.fake.handle_embeddings(path, headers, body)
        self.fake.track_in_flight(+1)
        try:
            if step is not None and not isinstance(step, Reply):
                self._answer(request, step)
                return
            latency = self.fake.latency if step is None or step.latency is None else step.latency
            if latency > 0 and self.fake.stopping.wait(latency):
                self.close_connection = True
                return
            try:
                payload = embeddings.response(body)
            except embeddings.InvalidRequest as exc:
                self._send_json(400, wire.error_body("openai", HttpError(400, message=str(exc))))
                return
            self._send_json(200, payload)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        finally:
            self.fake.track_in_flight(-1)

    def _answer(self, request: RecordedRequest, step: Step | None) -> None:
        if step is None:
            key = request.script_key or "default"
            step = HttpError(400, message=f"fake provider: script '{key}' has no reply left")
        if isinstance(step, Hang):
            self.fake.stopping.wait(step.seconds)
            self.close_connection = True
            return
        if isinstance(step, HttpError):
            extra = {} if step.retry_after is None else {"retry-after": f"{step.retry_after:g}"}
            self._send_json(step.status, wire.error_body(request.wire, step), extra)
            return
        if isinstance(step, RawReply):
            self._send_json(step.status, dict(step.body))
            return
        latency = self.fake.latency if step.latency is None else step.latency
        if latency > 0 and self.fake.stopping.wait(latency):
            self.close_connection = True
            return
        self._send_reply(request, step)

    def _send_reply(self, request: RecordedRequest, reply: Reply) -> None:
        model = request.model or "fake-model"
        if request.wire == "google":
            if request.stream:
                events = google_wire.stream_events(reply, model)
                self._send_events(events, interval=reply.stream_interval or 0.0)
            else:
                self._send_json(200, google_wire.message(reply, model))
            return
        if not request.stream:
            if request.wire == "openai":
                self._send_json(200, wire.openai_completion(reply, model))
            else:
                self._send_json(200, wire.anthropic_message(reply, model))
            return
        options = request.body.get("stream_options") or {}
        include_usage = bool(options.get("include_usage"))
        events = wire.stream(request.wire, reply, model, include_usage=include_usage)
        self._send_events(events, interval=reply.stream_interval or 0.0)

    def _request_id_header(self) -> tuple[str, str]:
        return ("x-request-id", f"req_{uuid.uuid4().hex[:24]}")

    def _send_json(
        self, status: int, payload: dict[str, Any], extra: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header(*self._request_id_header())
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_events(self, events: Iterable[bytes], *, interval: float = 0.0) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header(*self._request_id_header())
        self.end_headers()
        chunks = [b"%X\r\n%s\r\n" % (len(event), event) for event in events]
        if interval > 0:  # one write per event, as a model produces them
            for chunk in chunks:
                self.wfile.write(chunk)
                self.wfile.flush()
                if self.fake.stopping.wait(interval):
                    self.close_connection = True
                    return
            self.wfile.write(b"0\r\n\r\n")
            return
        # One chunk per event, all in one write: the client still parses them one by one.
        self.wfile.write(b"".join(chunks) + b"0\r\n\r\n")


class FakeProviderServer:
    """Scripts are addressed per conversation: the `x-fake-script` header names one, else a script
    registered under the request's model is used, else the default script (key None).

    >>> with FakeProviderServer() as server:
    ...     server.enqueue(rate_limited(), text_reply("Hi"))
    ...     # point a client at server.openai_base_url or server.anthropic_base_url
    """

    def __init__(
        self, *, host: str = "127.0.0.1", port: int = 0, latency: float = 0.0, record: bool = True
    ) -> None:
        self.latency = latency  # seconds before each reply (a Reply's own latency wins); 0: none
        self.record = record  # benchmarks switch recording off to keep memory flat
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._scripts: dict[str | None, Script] = {None: Script()}
        self._requests: list[RecordedRequest] = []
        self._count = 0
        self.in_flight = 0  # requests being answered right now
        self.max_in_flight = 0  # the most at once since start (benchmarks: concurrency reached)
        self._httpd = _HTTPServer((host, port), _Handler)
        self._httpd.fake = self
        self._thread: threading.Thread | None = None

    def track_in_flight(self, delta: int) -> None:
        with self._lock:
            self.in_flight += delta
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    # lifecycle --------------------------------------------------------------------------------
    def start(self) -> FakeProviderServer:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()  # releases hanging and sleeping handlers
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.server_close()

    def serve_forever(self) -> None:
        """Serve in the calling thread (the command line)."""
        self._httpd.serve_forever(poll_interval=0.5)

    def __enter__(self) -> FakeProviderServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # addresses --------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._httpd.server_port

    @property
    def url(self) -> str:
        return f"http://{self._httpd.server_name}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """For the OpenAI SDK (and `openai_compatible`), which appends /chat/completions (and
        /embeddings)."""
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """For the Anthropic SDK, which appends /v1/messages."""
        return self.url

    @property
    def google_base_url(self) -> str:
        """For the Google Gen AI SDK, which appends /v1beta/models/{model}:generateContent (or
        :streamGenerateContent?alt=sse)."""
        return self.url

    # scripting --------------------------------------------------------------------------------
    def script(self, key: str | None = None) -> Script:
        """The script under `key` (a model name or an `x-fake-script` value), created if needed."""
        with self._lock:
            return self._scripts.setdefault(key, Script())

    def enqueue(self, *steps: Step, key: str | None = None) -> Script:
        return self.script(key).push(*steps)

    def set_responder(self, responder: Responder | None, *, key: str | None = None) -> Script:
        script = self.script(key)
        script.responder = responder
        return script

    def reset(self) -> None:
        with self._lock:
            self._scripts = {None: Script()}
            self._requests.clear()
            self._count = 0

    # what was received ------------------------------------------------------------------------
    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def request_count(self) -> int:
        with self._lock:
            return self._count

    def requests_for(self, key: str | None) -> list[RecordedRequest]:
        return [r for r in self.requests if r.script_key == key]

    def handle_embeddings(
        self, path: str, headers: dict[str, str], body: dict[str, Any]
    ) -> tuple[RecordedRequest, Step | None]:
        """Record an embeddings request; the next queued step of the script registered under its
        ``x-fake-script`` header or its model, if there is one (never the default script's, nor a
        responder's: those answer chat)."""
        with self._lock:
            key = headers.get(SCRIPT_HEADER)
            if key is None and body.get("model") in self._scripts:
                key = body["model"]
            script = self._scripts.get(key) if key is not None else None
            request = RecordedRequest("openai", path, headers, body, key)
            self._count += 1
            if self.record:
                self._requests.append(request)
        return request, script.next_queued() if script is not None else None

    def handle(
        self, route: Wire, path: str, headers: dict[str, str], body: dict[str, Any]
    ) -> tuple[RecordedRequest, Step | None]:
        """Record the request and take the next step of its script; a conversation the real API
        would refuse is answered 400 without taking a step."""
        with self._lock:
            key = headers.get(SCRIPT_HEADER)
            # The Gemini API names the model in the path, the others in the body.
            model = google_request.model(path) if route == "google" else body.get("model")
            if key is None and model in self._scripts:
                key = model
            script = self._scripts.setdefault(key, Script())
            request = RecordedRequest(route, path, headers, body, key)
            self._count += 1
            if self.record:
                self._requests.append(request)
        problem = order_error(route, body)
        if problem is not None:
            return request, HttpError(400, message=problem)
        return request, script.next_step(request)
