"""Live updates: messages sent to Channels groups after the transaction that wrote them commits.

The runtime's hot path must not wait for Redis (``async_to_sync(group_send)`` costs ~2 ms per
event), so messages go onto an in-process queue and one background thread per process publishes
them, a batch at a time: what arrives within ``AGENTDESK_BROADCAST_BATCH_MS`` of a batch's first
message goes with it (one Redis round trip, and one wake-up of the thread, instead of one per
message). Delivery is best effort: a client that reconnects asks for what it missed by sequence
number, which the database has.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import redis
from channels.layers import get_channel_layer
from channels_redis.pubsub import RedisPubSubChannelLayer
from django.conf import settings
from django.db import transaction

logger = logging.getLogger(__name__)


def execution_group(execution_id: uuid.UUID | str) -> str:
    return f"execution.{execution_id}"


def agency_group(agency_id: uuid.UUID | str) -> str:
    return f"agency.{agency_id}"


def user_group(agency_id: uuid.UUID | str, user_id: int) -> str:
    """One member of one agency: what is meant for that person only (a notification to them)."""
    return f"agency.{agency_id}.user.{user_id}"


class _Publisher:
    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def publish(self, groups: list[str], message: dict[str, Any]) -> None:
        self._ensure_started()
        self._queue.put((groups, message))

    def flush(self, timeout: float = 5.0) -> None:
        """Wait until everything queued so far has been sent (tests, benchmarks, shutdown)."""
        if self._thread is None:
            return
        done = threading.Event()
        self._queue.put(done)
        done.wait(timeout)

    def _ensure_started(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="realtime-publisher", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        layer = get_channel_layer()
        send = _pipelined_sender(layer) or _async_sender(layer)
        window = settings.AGENTDESK_BROADCAST_BATCH_MS / 1000
        while True:
            batch = self._next_batch(window)
            messages = [item for item in batch if not isinstance(item, threading.Event)]
            if messages and layer is not None:
                try:
                    send(messages)
                except Exception:  # a lost live update must never break the sender
                    logger.exception("broadcast of %d messages failed", len(messages))
            for item in batch:
                if isinstance(item, threading.Event):
                    item.set()

    def _next_batch(self, window: float) -> list[Any]:
        """Block for a first item, then take what arrives within ``window`` after it; a flush
        request ends the wait at once."""
        batch = [self._queue.get()]
        deadline = time.monotonic() + window
        while not isinstance(batch[-1], threading.Event):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                batch.append(self._queue.get(timeout=remaining))
            except queue.Empty:
                break
        while not self._queue.empty():
            batch.append(self._queue.get_nowait())
        return batch


Batch = list[tuple[list[str], dict[str, Any]]]


def _pipelined_sender(layer: Any) -> Callable[[Batch], None] | None:
    """For the Redis pub/sub layer on one Redis: a batch as one pipeline of PUBLISH commands on
    a plain Redis connection, each message serialized once for all its groups — a tenth of the
    CPU of one ``group_send`` coroutine per group, which the workers' hot path competes with.

    The channel names and payloads are the layer's own (``<prefix>__group__<group>``, the
    layer's serializer), so the layer's consumers receive them as if sent by ``group_send``.
    """
    if not isinstance(layer, RedisPubSubChannelLayer):
        return None
    hosts = layer._kwargs.get("hosts") or []
    if len(hosts) != 1 or not isinstance(hosts[0], str):
        return None  # sharded or dict-configured: leave it to the layer
    client = redis.Redis.from_url(hosts[0])
    prefix = layer._kwargs.get("prefix", "asgi")

    def send(batch: Batch) -> None:
        pipeline = client.pipeline(transaction=False)
        for groups, message in batch:
            data = layer.serialize(message)
            for group in groups:
                pipeline.publish(f"{prefix}__group__{group}", data)
        pipeline.execute()

    return send


def _async_sender(layer: Any) -> Callable[[Batch], None]:
    """Any other layer: its ``group_send`` on this thread's own event loop."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)  # the pub/sub layer looks the loop up

    async def one(group: str, message: dict[str, Any]) -> None:
        try:
            await layer.group_send(group, message)
        except Exception:
            logger.exception("broadcast to %s failed", group)

    def send(batch: Batch) -> None:
        sends = [one(group, message) for groups, message in batch for group in groups]
        loop.run_until_complete(asyncio.gather(*sends))

    return send


_publisher = _Publisher()


def broadcast_on_commit(
    groups: list[str], message: dict[str, Any], *, using: str = "default"
) -> None:
    """Send ``message`` (a Channels event: needs a ``type``) to ``groups`` once the current
    transaction commits; dropped if it rolls back. Outside a transaction it is sent at once."""
    transaction.on_commit(lambda: broadcast(groups, message), using=using)


def broadcast(groups: list[str], message: dict[str, Any]) -> None:
    """Send ``message`` to ``groups`` now (the caller has committed what it announces)."""
    _publisher.publish(groups, message)


def flush(timeout: float = 5.0) -> None:
    _publisher.flush(timeout)
