"""Websocket consumers: one execution's events, and one agency's dashboard. Thin: who may watch
is decided by :mod:`live.auth` and :mod:`live.selectors`; what is sent is :mod:`live.protocol`
(the sockets' own) and :mod:`agents.lifecycle.protocol` (the events).
Nothing is writable over a socket: a client may only authenticate and ping. Authenticating,
and closing a socket whose credential ends or changes, is :mod:`live.authenticating`'s.

Catching up without a gap or a duplicate (docs/live-protocol.md): the consumer subscribes to the
execution's group first, then publishes a marker to that group and waits for it. Events that
arrive before the marker were committed before it was published, so the database read that
follows the marker has them (they are dropped as they arrive); events after it are sent only if
numbered past what the read sent. A gap in the numbers (two processes' broadcasts crossing, or
a broadcast lost while Redis was down) is filled from the database, and a watcher of a run still
going re-reads the run's last number every ``RESYNC_SECONDS`` to converge after lost broadcasts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from typing import Any

from channels.db import database_sync_to_async
from django.http import Http404

from agents.lifecycle.protocol import ExecutionEvent
from agents.models import Execution, ExecutionStatus
from core import realtime
from core.api.principal import Principal, principal_context
from live import auth, protocol, selectors
from live.authenticating import AuthenticatingConsumer

logger = logging.getLogger(__name__)

MARKER_WAIT_SECONDS = 0.5  # then the marker is published again (at most MARKER_TRIES times)
MARKER_TRIES = 4
RESYNC_SECONDS = 10.0
_PARKED_OR_DONE = {
    ExecutionStatus.WAITING_APPROVAL,
    ExecutionStatus.WAITING_INPUT,
    ExecutionStatus.COMPLETED,
    ExecutionStatus.FAILED,
    ExecutionStatus.CANCELLED,
    ExecutionStatus.TIMED_OUT,
}


class ExecutionConsumer(AuthenticatingConsumer):
    """``/ws/executions/<id>/?after=<seq>``: the execution's snapshot, the events it missed
    after ``seq`` (all, without it), then its live events and streamed model text."""

    execution_id: uuid.UUID
    after = 0

    def parse_query(self, query: dict[str, list[str]]) -> None:
        raw = self.scope["url_route"]["kwargs"]["execution_id"]
        try:
            self.execution_id = uuid.UUID(raw)
        except ValueError:
            self.execution_id = uuid.UUID(int=0)  # matches nothing: refused like any other
        if "after" in query:
            after = int(query["after"][-1])
            if after < 0:
                raise ValueError("after must be >= 0")
            self.after = after

    async def start(self, principal: Principal) -> None:
        self.lock = asyncio.Lock()
        self.caught_up = False
        self.last_seq = self.after
        self.terminal = False
        self.resync: asyncio.Task[None] | None = None
        # Refused alike when missing or another agency's, before joining anything.
        await database_sync_to_async(self._check_access)()
        self.group = realtime.execution_group(self.execution_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        self.marker = uuid.uuid4().hex
        self.marker_task = asyncio.create_task(self._publish_marker())

    def _check_access(self) -> None:
        assert self.principal is not None
        with principal_context(self.principal):
            selectors.execution_for_watcher(
                principal=self.principal, execution_id=self.execution_id
            )

    async def _publish_marker(self) -> None:
        for _ in range(MARKER_TRIES):
            try:
                await self.channel_layer.group_send(
                    self.group, {"type": "live.marker", "marker": self.marker}
                )
            except Exception:  # Redis going away or coming back: no marker will come
                logger.warning("live marker of execution %s not published", self.execution_id)
                break
            await asyncio.sleep(MARKER_WAIT_SECONDS)
            if self.caught_up:
                return
        # The subscription never saw a marker (Redis trouble): read what the database has;
        # the resync below keeps it converging.
        await self._catch_up()

    async def live_marker(self, message: dict[str, Any]) -> None:
        if message.get("marker") == getattr(self, "marker", None) and not self.caught_up:
            await self._catch_up()

    async def _catch_up(self) -> None:
        async with self.lock:
            if self.caught_up:
                return
            try:
                snapshot, events = await self._read(self.last_seq)
            except Http404:
                await self.close(code=protocol.CLOSE_NOT_FOUND)
                return
            await self.send_json(snapshot)
            await self._send_events(events)
            self.last_seq = max(self.last_seq, snapshot["seq"])
            self.terminal = snapshot["status"] in _TERMINAL
            self.caught_up = True
            if not self.terminal:
                self.resync = asyncio.create_task(self._resync_periodically())

    @database_sync_to_async
    def _read(
        self, after: int, *, upto: int | None = None
    ) -> tuple[protocol.Snapshot, list[ExecutionEvent]]:
        assert self.principal is not None
        with principal_context(self.principal):
            execution = selectors.execution_for_watcher(
                principal=self.principal, execution_id=self.execution_id
            )
            # The snapshot is read first: events committed after it are numbered past it.
            snapshot = selectors.execution_snapshot(execution)
            events = selectors.execution_events(execution=execution, after=after, upto=upto)
        return snapshot, events

    async def _send_events(self, events: list[ExecutionEvent]) -> None:
        for event in events:
            if event["seq"] > self.last_seq:
                await self.send(text_data=_event_text(event))
                self.last_seq = event["seq"]

    async def execution_event(self, message: dict[str, Any]) -> None:
        if not self.caught_up:
            return  # committed before the marker: the catch-up's read has it
        seq = int(message["seq"])
        async with self.lock:
            if seq <= self.last_seq:
                return  # already sent (from the database, or a duplicate delivery)
            parked_or_done = message["kind"] == "status" and message["status"] in _PARKED_OR_DONE
            if seq > self.last_seq + 1 or parked_or_done:
                # A gap is filled from the database; a run that parks or ends also gets a new
                # snapshot (what it waits for, its outcome), read with the missing events.
                await self._fill(upto=None if parked_or_done else seq)
            if seq > self.last_seq:
                await self.send(text_data=_event_text(message))  # type: ignore[arg-type]
                self.last_seq = seq
            self.terminal = self.terminal or message["status"] in _TERMINAL

    async def _fill(self, *, upto: int | None) -> None:
        """Send what the database has past ``last_seq`` (up to ``upto``), with a new snapshot
        when the read reaches the run's end or a park. Lock held."""
        try:
            snapshot, events = await self._read(self.last_seq, upto=upto)
        except Http404:
            await self.close(code=protocol.CLOSE_NOT_FOUND)
            return
        if upto is None:
            # Before the events, as on connecting: the client applies to a snapshot only the
            # events numbered past it.
            await self.send_json(snapshot)
            self.terminal = snapshot["status"] in _TERMINAL
        await self._send_events(events)
        if upto is None:
            self.last_seq = max(self.last_seq, snapshot["seq"])

    async def execution_token(self, message: dict[str, Any]) -> None:
        if self.caught_up:
            await self.send_json(
                {
                    "type": "token",
                    "execution_id": message["execution_id"],
                    "step_number": message["step_number"],
                    "text": message["text"],
                }
            )

    async def _resync_periodically(self) -> None:
        while not self.terminal:
            await asyncio.sleep(RESYNC_SECONDS)
            try:
                async with self.lock:
                    if await self._behind():
                        await self._fill(upto=None)
            except Exception:  # a database outage: try again next time
                logger.warning("live resync of execution %s failed", self.execution_id)

    @database_sync_to_async
    def _behind(self) -> bool:
        assert self.principal is not None
        with principal_context(self.principal):
            current = (
                Execution.objects.filter(pk=self.execution_id)
                .values_list("sequence", flat=True)
                .first()
            )
        return current is None or current > self.last_seq

    async def disconnect(self, code: int) -> None:
        for task in (getattr(self, "marker_task", None), getattr(self, "resync", None)):
            if task is not None:
                task.cancel()
        await super().disconnect(code)
        if hasattr(self, "group"):
            with contextlib.suppress(Exception):  # Redis gone: nothing left to leave
                await self.channel_layer.group_discard(self.group, self.channel_name)


_TERMINAL = {
    ExecutionStatus.COMPLETED,
    ExecutionStatus.FAILED,
    ExecutionStatus.CANCELLED,
    ExecutionStatus.TIMED_OUT,
}


# The text of recent events, shared by this process's sockets: the watchers of one execution
# are sent the same event, encoded once instead of once per socket.
_EVENT_TEXTS: dict[tuple[str, int], str] = {}
_EVENT_TEXTS_LIMIT = 1024


def _event_text(event: ExecutionEvent) -> str:
    """The event as the client receives it, JSON (an execution's events are numbered: one
    number, one event)."""
    key = (event["execution_id"], event["seq"])
    text = _EVENT_TEXTS.get(key)
    if text is None:
        if len(_EVENT_TEXTS) >= _EVENT_TEXTS_LIMIT:
            _EVENT_TEXTS.clear()
        text = _EVENT_TEXTS[key] = json.dumps(_client_event(event))
    return text


def _client_event(event: ExecutionEvent) -> dict[str, Any]:
    """The group message as the client receives it: ``type`` is the event's kind."""
    return {
        "type": event["kind"],
        "seq": event["seq"],
        "execution_id": event["execution_id"],
        "agent_id": event["agent_id"],
        "status": event["status"],
        "data": event["data"],
    }


class AgencyConsumer(AuthenticatingConsumer):
    """``/ws/agency/``: every status change of the agency's runs (for dashboards), and
    notifications meant for the logged-in person. A superuser names the agency with
    ``?agency=<id>``."""

    agency_param: uuid.UUID | None = None

    def parse_query(self, query: dict[str, list[str]]) -> None:
        if "agency" in query:
            self.agency_param = uuid.UUID(query["agency"][-1])

    async def start(self, principal: Principal) -> None:
        agency_id = principal.agency_id
        if principal.is_superuser and self.agency_param is not None:
            agency_id = await database_sync_to_async(auth.agency_if_exists)(self.agency_param)
        if agency_id is None:
            raise Http404("no agency")
        self.groups_joined = [realtime.agency_group(agency_id)]
        if principal.user_id is not None:
            self.groups_joined.append(realtime.user_group(agency_id, principal.user_id))
        for group in self.groups_joined:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.send_json({"type": "ready", "agency_id": str(agency_id)})

    async def execution_event(self, message: dict[str, Any]) -> None:
        await self.send(text_data=_event_text(message))  # type: ignore[arg-type]

    async def notification(self, message: dict[str, Any]) -> None:
        await self.send_json(message)

    async def disconnect(self, code: int) -> None:
        await super().disconnect(code)
        for group in getattr(self, "groups_joined", []):
            with contextlib.suppress(Exception):
                await self.channel_layer.group_discard(group, self.channel_name)
