"""The consumers' common base: authenticate a socket, and close it when its credential ends or
changes (docs/live-protocol.md, "Close codes").

A socket joins its credential's groups (:meth:`live.auth.Credential.groups`) before the
credential is checked, so every revocation, logout or membership change committed after the
check arrives as a ``credential.changed`` message and closes it at once, without a database
read per event. What no message announces is found by one task per socket: an API key's
``expires_at`` closes it at that moment (no read), and every ``RECHECK_SECONDS`` the credential
is read again (:func:`live.auth.recheck`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any
from urllib.parse import parse_qs

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.http import Http404
from django.utils import timezone
from rest_framework.exceptions import Throttled

from core import realtime
from core.api.principal import Principal
from live import auth, protocol

logger = logging.getLogger(__name__)

AUTH_TIMEOUT_SECONDS = 5.0  # for the first message of a client authenticating with a key
RECHECK_SECONDS = 60.0  # the credential read again, for what no message announces
CLIENT_GONE = 1006  # the close code of a connection lost without a close frame (RFC 6455)

_CLOSE_CODES = {
    realtime.CREDENTIAL_ENDED: protocol.CLOSE_UNAUTHENTICATED,
    realtime.CREDENTIAL_REMOVED: protocol.CLOSE_FORBIDDEN,
    realtime.CREDENTIAL_ROLE_CHANGED: protocol.CLOSE_RECONNECT,
}


class AuthenticatingConsumer(AsyncJsonWebsocketConsumer):
    """Accepts, then authenticates by the admin session, an ``Authorization: Bearer`` key on the
    handshake, or a first message ``{"type": "auth", "api_key": ...}``; anything else closes
    with CLOSE_UNAUTHENTICATED. Subclasses start watching in :meth:`start` and call this
    class's :meth:`disconnect`."""

    principal: Principal | None = None
    _left = False  # its disconnect() has run

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            # However it ends, a consumer stops its tasks and leaves its groups. Channels calls
            # disconnect() only for the client's websocket.disconnect, and a client that leaves
            # while its socket still starts (its credential read, under load, for seconds) makes
            # the next send raise ClientDisconnected instead: that socket's credential task then
            # read the database every minute for ever and held the consumer, its connection and
            # its groups (three of four staff pages' sockets in a 20-minute soak; issue 25).
            if not self._left:
                await self.disconnect(CLIENT_GONE)

    async def connect(self) -> None:
        self._auth_timer: asyncio.Task[None] | None = None
        self._watch: asyncio.Task[None] | None = None
        self._credential: auth.Credential | None = None
        self._credential_groups: list[str] = []
        self._ended = False  # closed for its credential: nothing more is started or sent
        await self.accept()
        try:
            self.parse_query(parse_qs(self.scope.get("query_string", b"").decode("latin-1")))
        except ValueError:
            await self.close(code=protocol.CLOSE_BAD_REQUEST)
            return
        credential = auth.credential_for_handshake(self.scope)
        if credential is None:
            self._auth_timer = asyncio.create_task(self._close_unless_authenticated())
            return
        await self._begin(credential)

    def parse_query(self, query: dict[str, list[str]]) -> None:
        """Read the handshake's query parameters; ValueError: bad request."""

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if not isinstance(content, dict):
            return
        kind = content.get("type")
        if kind == "ping":
            await self.send_json({"type": "pong"})
        elif kind == "auth" and self._credential is None:
            if self._auth_timer is not None:
                self._auth_timer.cancel()
            key = content.get("api_key")
            if not isinstance(key, str) or not key.strip():
                await self.close(code=protocol.CLOSE_UNAUTHENTICATED)
                return
            await self._begin(auth.Credential(api_key=key.strip()))
        # Anything else is ignored: nothing is writable over a socket.

    async def _close_unless_authenticated(self) -> None:
        await asyncio.sleep(AUTH_TIMEOUT_SECONDS)
        if self.principal is None:
            await self.close(code=protocol.CLOSE_UNAUTHENTICATED)

    async def _begin(self, credential: auth.Credential) -> None:
        self._credential = credential
        # Joined before the check: a change committed after it is announced to these groups.
        self._credential_groups = credential.groups()
        for group in self._credential_groups:
            await self.channel_layer.group_add(group, self.channel_name)
        client = self.scope.get("client") or (None,)
        try:
            principal = await database_sync_to_async(auth.authenticate_new)(credential, client[0])
        except Throttled:
            await self.close(code=protocol.CLOSE_THROTTLED)
            return
        if self._ended:
            return
        if principal is None:
            await self.close(code=protocol.CLOSE_UNAUTHENTICATED)
            return
        self.principal = principal
        if principal.agency_id is not None:
            group = realtime.agency_credentials_group(principal.agency_id)
            self._credential_groups.append(group)
            await self.channel_layer.group_add(group, self.channel_name)
        self._watch = asyncio.create_task(self._watch_credential(credential, principal))
        try:
            await self.start(principal)
        except Http404:
            await self.close(code=protocol.CLOSE_NOT_FOUND)

    async def start(self, principal: Principal) -> None:
        raise NotImplementedError

    async def credential_changed(self, message: dict[str, Any]) -> None:
        """``credential.changed`` on a credential group: the change has committed."""
        change = str(message.get("change", ""))
        await self._end(_CLOSE_CODES.get(change, protocol.CLOSE_RECONNECT), message.get("reason"))

    async def credential_recheck(self, message: dict[str, Any]) -> None:
        """``credential.recheck``: what the credential depends on changed (committed): it is
        read again now, not at the next period."""
        if self._credential is not None and self.principal is not None:
            await self._recheck(self._credential, self.principal)

    async def _recheck(self, credential: auth.Credential, principal: Principal) -> bool:
        """Read the credential again; True if that ended the socket."""
        try:
            verdict = await database_sync_to_async(auth.recheck)(credential, principal)
        except Exception:  # a database outage: the next check tells
            logger.warning("live socket: its credential could not be checked again")
            return False
        if verdict is None:
            return False
        change, reason = verdict
        await self._end(_CLOSE_CODES[change], reason)
        return True

    async def _end(self, code: int, reason: Any) -> None:
        if self._ended:
            return
        self._ended = True
        # A close frame's reason has at most 123 bytes.
        text = str(reason or "").encode()[:123].decode(errors="ignore")
        logger.info("live socket closed with %d: %s", code, text)
        await self.close(code=code, reason=text or None)

    async def _watch_credential(self, credential: auth.Credential, principal: Principal) -> None:
        expires_at = principal.api_key.expires_at if principal.api_key is not None else None
        while not self._ended:
            wait = RECHECK_SECONDS
            if expires_at is not None:
                wait = min(wait, (expires_at - timezone.now()).total_seconds())
            if wait > 0:
                await asyncio.sleep(wait)
            if expires_at is not None and expires_at <= timezone.now():
                await self._end(protocol.CLOSE_UNAUTHENTICATED, "API key expired")
                return
            if await self._recheck(credential, principal):
                return

    # Once closed for its credential, a socket sends nothing more (an event that a task had
    # under way when the close went).
    async def send(self, *args: Any, **kwargs: Any) -> None:
        if not self._ended:
            await super().send(*args, **kwargs)

    async def send_json(self, content: Any, close: bool = False) -> None:
        if not self._ended:
            await super().send_json(content, close)

    async def dispatch(self, message: dict[str, Any]) -> None:
        # Channels' own dispatch first closes stale database connections through
        # sync_to_async: a hop to the process's one sync thread per message and consumer, so
        # 50 watchers of a run queued 50 hops behind each other per event (bench.live_latency).
        # Every database access here goes through database_sync_to_async, which does that in
        # its thread anyway; the handler is called directly.
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if text_data is None:
            return  # binary frames mean nothing here
        try:
            await super().receive(text_data=text_data)
        except ValueError:  # not JSON
            return

    async def disconnect(self, code: int) -> None:
        self._left = True
        for task in (getattr(self, "_auth_timer", None), getattr(self, "_watch", None)):
            if task is not None:
                task.cancel()
        for group in getattr(self, "_credential_groups", []):
            with contextlib.suppress(Exception):  # Redis gone: nothing left to leave
                await self.channel_layer.group_discard(group, self.channel_name)
