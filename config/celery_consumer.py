"""The worker's consumer (``CELERY_WORKER_CONSUMER``): Celery's, with a bounded reconnection
interval. Its own module, so that only a worker imports Celery's worker machinery."""

import functools
from typing import Any

from celery.worker.consumer import Consumer

# While the broker is unreachable, a worker tries it again this often at most (seconds).
BROKER_RETRY_MAX_SECONDS = 2.0


class BrokerConsumer(Consumer):
    """Celery's consumer, reconnecting to a broker that went away every 2 s at most.

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
