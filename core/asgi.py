"""Every HTTP request and websocket starts from an empty context, not a copy of another one's.

An asyncio task starts with a copy of the context current where it is created. An HTTP server
creates a request's task from its connection's read callback, and asyncio runs that callback in
the context that was current when reading was last resumed. Uvicorn resumes reading from inside
the request's own task (``receive()`` and the end of a response on a keep-alive connection), so
the next request on that connection starts with the previous request's context variables
(cpython#140947, uvicorn#2167; uvicorn's ``--reset-contextvars`` is the opt-in cure).

For Django that is a connection leak: its ASGI handler enters asgiref's ``ThreadSensitiveContext``
for each request, which sets a context variable only when none is set. A request that inherited
one runs its view on the previous request's executor thread, takes a pooled connection there,
and then closes "its" connections (``request_finished``) on another thread that has none; the
previous request ends its executor, the thread exits, and the connection is never given back.
Under load every few dozen pages leaked one, until the pool's ``max_size`` was reached and pages
answered 503 after the pool timeout (issue 25).

Running the application in a task with a fresh ``contextvars.Context`` fixes it whatever server
runs the application or with whatever flags.
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler as DjangoASGIHandler
from django.http import HttpRequest
from django.http.response import HttpResponseBase

Scope = dict[str, Any]


class IsolatedContext:
    """ASGI wrapper: HTTP and websocket connections run in a task with an empty context.
    Cancelling the server's task cancels the application's (awaiting a task forwards it)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)  # lifespan: the server's own context
            return
        task = asyncio.get_running_loop().create_task(
            self.app(scope, receive, send), context=contextvars.Context()
        )
        await task


class ASGIHandler(DjangoASGIHandler):
    """Django's ASGI handler, except that a request whose client leaves ends its own work before
    Django's ``request_finished`` closes the request's database connections.

    On a disconnect, Django cancels the coroutine that awaits the response and sends
    ``request_finished`` at once, whose ``close_old_connections`` runs on the request's thread.
    The request's sync code is still running there: a sync middleware (``TenantMiddleware``, in
    the transaction it opened) waits in ``async_to_sync`` for the async middlewares inside it,
    and asgiref runs other thread-sensitive calls on a thread that waits so. The connection went
    back to the pool inside that transaction, and the view's next query answered 500 ("Cannot
    open a new connection in an atomic block"); under load, abandoned pages did so by the dozen
    (issue 25). Here the response is awaited to its end, then thrown away, and the cancellation
    goes on as Django expects."""

    async def run_get_response(self, request: HttpRequest) -> HttpResponseBase:
        work = asyncio.ensure_future(super().run_get_response(request))
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            # The client left (or the server stops): wait for the request's own work, whatever
            # it ends with, and only then let the cancellation reach Django.
            await asyncio.wait([work])
            if not work.cancelled() and work.exception() is None:
                await sync_to_async(work.result().close)()  # its files and its own signal
            raise
