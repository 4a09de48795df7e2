"""Live updates: messages sent to Channels groups after the transaction that wrote them commits.

The runtime's hot path must not wait for Redis (``async_to_sync(group_send)`` costs ~2 ms per
event), so messages go onto an in-process queue and one background thread per process publishes
them, a batch at a time: a message that finds the thread idle (no batch sent in the last
``AGENTDESK_BROADCAST_BATCH_MS``) goes at once; messages that follow within that window of the
last batch wait for the window's end and go together (one Redis round trip, and one wake-up of
the thread, instead of one per message). A watcher of a lone run waits for no timer, and a busy
process sends at most one batch per window. Delivery is best effort: a client that reconnects
asks for what it missed by sequence number, which the database has.

The text of a model call in progress is not persisted at all (:class:`TextStream`: sent at
once, at most one message per batch however fast it grows).
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import redis
from channels.layers import get_channel_layer
from channels_redis.pubsub import RedisPubSubChannelLayer
from django.conf import settings
from django.db import transaction

logger = logging.getLogger(__name__)


class _FailureLog:
    """While Redis is down every batch fails the same way: one warning per outage, without a
    traceback, instead of one per batch. Any other failure is a bug and keeps its traceback."""

    def __init__(self) -> None:
        self.down = False

    def failed(self, exc: Exception, count: int) -> None:
        if not isinstance(exc, redis.ConnectionError | redis.TimeoutError | OSError):
            logger.error("broadcast of %d messages failed", count, exc_info=exc)
        elif not self.down:
            self.down = True
            logger.warning("live updates are dropped until Redis answers again: %s", exc)

    def succeeded(self) -> None:
        if self.down:
            self.down = False
            logger.warning("live updates are sent again (Redis answers)")


_broadcast_failures = _FailureLog()


class _Publisher:
    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._sent_at = 0.0  # time.monotonic() when the publisher thread took its last batch
        self._exit_flush = False  # flush registered to run at the interpreter's exit

    def publish(self, groups: list[str], message: dict[str, Any]) -> None:
        self._ensure_started()
        self._queue.put((groups, message))

    def publish_stream(self, stream: TextStream) -> None:
        """Queue ``stream``: its text is taken when its batch is sent (TextStream.take)."""
        self._ensure_started()
        self._queue.put(stream)

    def flush(self, timeout: float = 5.0) -> None:
        """Wait until everything queued so far has been sent (tests, benchmarks, shutdown)."""
        if self._thread is None or not self._thread.is_alive():
            return  # nothing was sent, or a forked child: the parent's thread is not here
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
                if not self._exit_flush:
                    # A process that ends right after its commit (``manage.py api_keys
                    # revoke``) would otherwise lose what it queued with the daemon thread.
                    atexit.register(self.flush)
                    self._exit_flush = True

    def _run(self) -> None:
        layer = get_channel_layer()
        send = _pipelined_sender(layer) or _async_sender(layer)
        window = settings.AGENTDESK_BROADCAST_BATCH_MS / 1000
        while True:
            batch = self._next_batch(window)
            messages = _messages(batch)
            if messages and layer is not None:
                try:
                    send(messages)
                except Exception as exc:  # a lost live update must never break the sender
                    _broadcast_failures.failed(exc, len(messages))
                else:
                    _broadcast_failures.succeeded()
            for item in batch:
                if isinstance(item, threading.Event):
                    item.set()

    def _next_batch(self, window: float) -> list[Any]:
        """Block for a first item. When the last batch went ``window`` or more ago it goes at
        once, with whatever is queued already; otherwise take what arrives until ``window``
        after the last batch. A flush request ends the wait at once."""
        batch = [self._queue.get()]
        deadline = self._sent_at + window
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
        self._sent_at = time.monotonic()
        return batch


Batch = list[tuple[list[str], dict[str, Any]]]


def _messages(batch: list[Any]) -> Batch:
    """The messages of a batch, in order: a text stream's as much text as it has now."""
    messages: Batch = []
    for item in batch:
        if isinstance(item, TextStream):
            message = item.take()
            if message is not None:
                messages.append((item.groups, message))
        elif not isinstance(item, threading.Event):
            messages.append(item)
    return messages


def _pubsub_target(layer: Any) -> tuple[str, str] | None:
    """The Redis URL and channel prefix of the Redis pub/sub layer on one Redis, else None."""
    if not isinstance(layer, RedisPubSubChannelLayer):
        return None
    hosts = layer._kwargs.get("hosts") or []
    if len(hosts) != 1 or not isinstance(hosts[0], str):
        return None  # sharded or dict-configured: leave it to the layer
    return hosts[0], layer._kwargs.get("prefix", "asgi")


def _group_channel(prefix: str, group: str) -> str:
    """The Redis channel the pub/sub layer subscribes for ``group`` (and publishes it on)."""
    return f"{prefix}__group__{group}"


def _pipelined_sender(layer: Any) -> Callable[[Batch], None] | None:
    """For the Redis pub/sub layer on one Redis: a batch as one pipeline of PUBLISH commands on
    a plain Redis connection, each message serialized once for all its groups — a tenth of the
    CPU of one ``group_send`` coroutine per group, which the workers' hot path competes with.

    The channel names and payloads are the layer's own (``<prefix>__group__<group>``, the
    layer's serializer), so the layer's consumers receive them as if sent by ``group_send``.

    The commands go out on one connection of the thread's own, written and read directly:
    a batch usually wakes the thread after milliseconds of idleness, with cold caches, and then
    a client pipeline object cost ~0.23 ms of CPU per batch against ~0.09 ms this way
    (bench.live_latency). A connection that fails is reopened once for the same batch (Redis
    restarted since the last one); a step or state change this sends twice is dropped by its
    number.
    """
    target = _pubsub_target(layer)
    if target is None:
        return None
    url, prefix = target
    connection = redis.ConnectionPool.from_url(url).get_connection()

    def send(batch: Batch) -> None:
        commands = []
        for groups, message in batch:
            data = layer.serialize(message)
            commands += [("PUBLISH", _group_channel(prefix, group), data) for group in groups]
        packed = connection.pack_commands(commands)
        for attempt in (1, 2):
            try:
                connection.send_packed_command(packed)
                for _ in commands:
                    connection.read_response()
                return
            except Exception as exc:
                connection.disconnect()  # a reply left unread must not answer the next batch
                lost = isinstance(exc, (redis.ConnectionError, redis.TimeoutError))
                if attempt == 2 or not lost:
                    raise

    return send


def _async_sender(layer: Any) -> Callable[[Batch], None]:
    """Any other layer: its ``group_send`` on this thread's own event loop."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)  # the pub/sub layer looks the loop up

    def send(batch: Batch) -> None:
        sends = [layer.group_send(group, message) for groups, message in batch for group in groups]
        results = loop.run_until_complete(asyncio.gather(*sends, return_exceptions=True))
        errors = [result for result in results if isinstance(result, Exception)]
        if errors:  # the others went; the sender reports the first
            raise errors[0]

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


class TextStream:
    """Text that grows while it is sent to ``groups`` (a model call's reply, to its watchers),
    at once and not after a commit: none of it is persisted.

    ``append`` is cheap: it queues the stream for the publisher only when it had nothing
    pending; the publisher takes all the text appended by the time it sends the batch (``take``)
    as one ``message`` with that text in ``field``. However fast the text grows, the groups get
    at most one message per batch (``AGENTDESK_BROADCAST_BATCH_MS``), in order, and ahead of
    anything published after the last ``append`` (the step that persists the reply).
    """

    def __init__(
        self, groups: list[str], message: Mapping[str, Any], *, field: str = "text"
    ) -> None:
        self.groups = groups
        self._message = dict(message)
        self._field = field
        self._parts: list[str] = []
        self._lock = threading.Lock()
        self.messages = 0  # sent so far (benchmarks, tests)

    def append(self, text: str) -> None:
        if not text:
            return
        with self._lock:
            queued = bool(self._parts)  # pending text means the stream is in the queue
            self._parts.append(text)
        if not queued:
            _publisher.publish_stream(self)

    def take(self) -> dict[str, Any] | None:
        """The message of the text appended since the last one, or None if there is none."""
        with self._lock:
            if not self._parts:
                return None
            text = "".join(self._parts)
            self._parts.clear()
        self.messages += 1
        return {**self._message, self._field: text}
