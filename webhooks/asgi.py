"""Webhook bodies bounded before Django reads them.

Django's ASGI handler reads a request's whole body (into a temporary file) before any view runs,
so a view can refuse a body over the limit only after it has arrived. For webhook deliveries,
which anyone who knows a URL may send, this wrapper gives Django at most one byte more than
``AGENTDESK_WEBHOOK_MAX_BODY_BYTES``: nothing at all when ``Content-Length`` already says more,
else the body cut off past the limit. The view then answers 413 (and logs it) from the header or
from what it got; the rest of the body is never stored. Other paths pass untouched.
"""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings

Scope = dict[str, Any]
Message = dict[str, Any]
_PATH = re.compile(r"^/api/v1/webhooks/[^/]+/?$")


def _declared_length(scope: Scope) -> int:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return 0
    return 0


class WebhookBodyLimit:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not _PATH.match(scope.get("path", "")):
            await self.app(scope, receive, send)
            return
        limit = settings.AGENTDESK_WEBHOOK_MAX_BODY_BYTES
        # Over the limit by its own Content-Length: Django gets an empty body.
        unread = _declared_length(scope) > limit
        received = 0
        ended = False

        async def bounded() -> Message:
            nonlocal unread, received, ended
            if unread:
                unread, ended = False, True
                return {"type": "http.request", "body": b"", "more_body": False}
            if ended:
                # The body Django got is over; from now on Django only waits for the client to
                # go away. Whatever else the client sends is dropped as it comes, never kept.
                while True:
                    dropped: Message = await receive()
                    if dropped["type"] != "http.request":
                        return dropped
            message: Message = await receive()
            if message["type"] != "http.request":
                return message
            body: bytes = message.get("body", b"")
            received += len(body)
            if received > limit:
                ended = True
                keep = len(body) - (received - limit - 1)
                return {"type": "http.request", "body": body[:keep], "more_body": False}
            if not message.get("more_body", False):
                ended = True
            return message

        await self.app(scope, bounded, send)
