"""The MCP endpoint in the ASGI application: ``/mcp`` (streamable HTTP) is answered here, every
other request goes on to the application it wraps (config/asgi.py).

Each HTTP request is authenticated first (:mod:`protocols.mcp.auth`): no key, a bad or revoked
one is a 401 with a JSON-RPC error body, before the SDK sees the request. The SDK's session
manager runs *stateless* with JSON responses: no session lives in a web process, so any web
process behind the load balancer answers any request, and nothing is kept between requests
but the key the client sends each time.

The session manager needs a running task group. ASGI servers do not all send the lifespan
messages (daphne does not; the Channels router refuses them), so it is started in the event loop
by the first MCP request and runs until the process ends.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from typing import Any

import mcp_types as types
from asgiref.sync import sync_to_async
from django.db import connections
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.responses import JSONResponse

from protocols.mcp.auth import MISSING, Caller, Refusal, authenticate, credential_from
from protocols.mcp.server import SCOPE_KEY, build_server

Scope = dict[str, Any]
PATH = "/mcp"
MAX_BODY_BYTES = 1024 * 1024  # an input is at most 20,000 characters


def _closing[T](fn: Callable[..., T], *args: Any) -> T:
    try:
        return fn(*args)
    finally:
        connections.close_all()  # an executor thread: its pooled connection goes back now


def _refused(refusal: Refusal) -> JSONResponse:
    headers = {"WWW-Authenticate": 'Bearer realm="mcp"'} if refusal.status == 401 else {}
    if refusal.retry_after is not None:
        headers["Retry-After"] = str(refusal.retry_after)
    body = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": types.INVALID_REQUEST,
            "message": refusal.message,
            "data": {"code": refusal.code},
        },
    }
    return JSONResponse(body, status_code=refusal.status, headers=headers)


class McpEndpoint:
    """ASGI: ``/mcp`` (and ``/mcp/``) to the MCP server, the rest to ``app``."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self._manager: Any = None
        self._ready: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None  # held: the loop keeps only weak references

    @staticmethod
    def handles(scope: Scope) -> bool:
        return scope["type"] == "http" and scope["path"].rstrip("/") == PATH

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if not self.handles(scope):
            await self.app(scope, receive, send)
            return
        raw = credential_from(scope.get("headers") or [])
        if not raw:
            await _refused(MISSING)(scope, receive, send)
            return
        client = scope.get("client")
        address = client[0] if client else None
        caller = await sync_to_async(_closing, thread_sensitive=False)(authenticate, raw, address)
        if isinstance(caller, Refusal):
            await _refused(caller)(scope, receive, send)
            return
        assert isinstance(caller, Caller)
        manager = await self._started()
        # The path the SDK's transport expects is its own; the caller rides in the scope.
        await manager.handle_request({**scope, SCOPE_KEY: caller}, receive, send)

    async def _started(self) -> Any:
        """The session manager, started on first use in a task of its own that outlives the
        request (in a fresh context: no request's context variables leak into it)."""
        if self._ready is None:
            loop = asyncio.get_running_loop()
            self._ready = loop.create_future()
            self._manager = StreamableHTTPSessionManager(
                app=build_server(),
                stateless=True,
                json_response=True,
                max_request_body_size=MAX_BODY_BYTES,
            )
            self._task = loop.create_task(
                self._run(self._manager, self._ready), context=contextvars.Context()
            )
        await asyncio.shield(self._ready)
        return self._manager

    @staticmethod
    async def _run(manager: Any, ready: asyncio.Future[None]) -> None:
        try:
            async with manager.run():
                ready.set_result(None)
                await asyncio.Event().wait()  # until the process (its loop) ends
        except BaseException as exc:
            if not ready.done():  # the requests waiting for it fail with the cause
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(exc))
            raise
