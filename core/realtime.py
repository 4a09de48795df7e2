"""Live updates: messages sent to Channels groups after the transaction that wrote them commits.

The runtime's hot path must not wait for Redis (``async_to_sync(group_send)`` costs ~2 ms per
event), so messages go onto an in-process queue and one background thread per process publishes
them on its own event loop. Delivery is best effort: a client that reconnects asks for what it
missed by sequence number, which the database has.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import uuid
from typing import Any

from channels.layers import get_channel_layer
from django.db import transaction

logger = logging.getLogger(__name__)


def execution_group(execution_id: uuid.UUID | str) -> str:
    return f"execution.{execution_id}"


def agency_group(agency_id: uuid.UUID | str) -> str:
    return f"agency.{agency_id}"


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
        # Block on the queue in this daemon thread (an executor thread would keep the process
        # from exiting), then send everything queued so far in one pass of the event loop.
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)  # the pub/sub layer looks the loop up
        layer = get_channel_layer()
        while True:
            batch = [self._queue.get()]
            while not self._queue.empty():
                batch.append(self._queue.get_nowait())
            sends = []
            for item in batch:
                if isinstance(item, threading.Event):
                    continue
                groups, message = item
                sends += [self._send(layer, group, message) for group in groups]
            if sends and layer is not None:
                loop.run_until_complete(asyncio.gather(*sends))
            for item in batch:
                if isinstance(item, threading.Event):
                    item.set()

    @staticmethod
    async def _send(layer: Any, group: str, message: dict[str, Any]) -> None:
        try:
            await layer.group_send(group, message)
        except Exception:  # a lost live update must never break the sender
            logger.exception("broadcast to %s failed", group)


_publisher = _Publisher()


def broadcast_on_commit(
    groups: list[str], message: dict[str, Any], *, using: str = "default"
) -> None:
    """Send ``message`` (a Channels event: needs a ``type``) to ``groups`` once the current
    transaction commits; dropped if it rolls back. Outside a transaction it is sent at once."""
    transaction.on_commit(lambda: _publisher.publish(groups, message), using=using)


def flush(timeout: float = 5.0) -> None:
    _publisher.flush(timeout)
