"""The worker's consumer (``CELERY_WORKER_CONSUMER``): Celery's, with a bounded reconnection
interval and acknowledgements that outlive their connection. Its own module, so that only a
worker imports Celery's worker machinery."""

import functools
import logging
from collections.abc import Callable
from typing import Any

from celery.worker.consumer import Consumer

logger = logging.getLogger(__name__)

# While the broker is unreachable, a worker tries it again this often at most (seconds).
BROKER_RETRY_MAX_SECONDS = 2.0


class BrokerConsumer(Consumer):
    """Celery's consumer, reconnecting to a broker that went away every 2 s at most, and
    dropping the acknowledgement of a message whose connection is gone.

    Celery gives kombu no retry intervals, so kombu's defaults apply: 2 s, 4 s, 6 s... up to
    30 s between attempts. After a Redis restart of half a minute the worker then came back up
    to 30 s after Redis did, and the runs lost with the broker waited that long on top of the
    reaper's re-delivery (ops/broker.py). One connection attempt every 2 s costs nothing.
    Together with ``CELERY_BROKER_CONNECTION_MAX_RETRIES = None`` the worker waits out any
    broker outage instead of exiting after 100 attempts."""

    def ensure_connected(self, conn: Any) -> Any:
        conn.ensure_connection = functools.partial(
            conn.ensure_connection,
            interval_start=BROKER_RETRY_MAX_SECONDS / 2,
            interval_step=BROKER_RETRY_MAX_SECONDS / 2,
            interval_max=BROKER_RETRY_MAX_SECONDS,
        )
        return super().ensure_connected(conn)

    def call_soon_ack(self, p: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return super().call_soon_ack(ack_unless_connection_gone, p, *args, **kwargs)


def ack_unless_connection_gone(ack: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``ack`` (a message's ``ack_log_error`` or ``reject_log_error``), dropped with a warning
    when the message's connection closed before it ran.

    A task that ends while Redis is down has its acknowledgement queued on the event loop; by the
    time the loop runs it the consumer has closed that connection, and kombu's Redis transport
    raises AttributeError (its channel's connection is None), which Celery does not count as a
    connection error: the worker exited with "Unrecoverable error" (seen on CI after a Redis
    crash). The delivery tag belongs to the dead channel anyway: the broker delivers the message
    again like any unacknowledged one, and the platform's tasks are idempotent (a run's second
    delivery finds it ended: agents.tasks)."""
    try:
        return ack(*args, **kwargs)
    except Exception:
        message = getattr(ack, "__self__", None)
        if message is None or not _connection_gone(message.channel):
            raise
        logger.warning(
            "acknowledgement of message %s dropped: its broker connection is gone (it is "
            "delivered again, and that delivery finds its work done)",
            getattr(message, "delivery_tag", "?"),
        )
        return None


def _connection_gone(channel: Any) -> bool:
    connection = getattr(channel, "connection", None)
    return bool(
        getattr(channel, "closed", False)
        or connection is None
        or getattr(connection, "client", None) is None
    )
