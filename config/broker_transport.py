"""kombu's Redis transport (``CELERY_BROKER_TRANSPORT`` for a ``redis://`` broker), whose
channels close completely when Redis is gone.

When a worker's connection to Redis breaks, Celery's consumer closes the connection twice:
``collect()`` first, which closes its channels and then detaches the transport from the
connection (``transport.client = None``), then ``close()``. kombu's ``Channel.close`` talks to
Redis before it marks the channel closed: it reads the reply of the BRPOP in flight, deletes the
channel's auto-delete fanout queues (the worker's control and gossip queues), and moves the
unacknowledged messages back to their queues. With Redis down the first of these raises, so the
channel stays open; the second close runs the rest on a transport with no connection, and
rebuilding the Redis client there raises ``AttributeError: 'NoneType' object has no attribute
'hostname'``. Celery counts that as an unrecoverable error and the worker exits (a Redis crash
or restart ended a plain ``celery -A config worker``; only ``manage.py up`` restarted it).

Here each of those steps gives up on a broker that is gone, so the first close completes and
the second has nothing left to do. What they would have done is done elsewhere: the BRPOP's
reply, if Redis sent one, was lost with the connection (a run's delivery lost with the broker
is sent again by the lease reaper: ops/broker.py); a fanout queue's binding left behind is
removed when the same worker declares it again; and the unacknowledged messages stay in Redis's
unacked set, which the transport restores after its visibility timeout, while the reaper sends
their runs again long before (docs/decisions/0008-run-delivery.md).
"""

from __future__ import annotations

import logging
from typing import Any

from kombu.transport import redis as kombu_redis
from kombu.transport.virtual import Empty

logger = logging.getLogger(__name__)


class QoS(kombu_redis.QoS):
    def restore_unacked(self, client: Any = None) -> None:
        try:
            super().restore_unacked(client)
        except self.channel.connection_errors as exc:
            if not self.channel._closing:
                raise
            # kombu's close marked them restored: they stay in Redis's unacked set.
            logger.warning(
                "unacknowledged messages left with the broker, which is gone (%s): Redis "
                "restores them after the visibility timeout, and the lease reaper sends their "
                "runs again before that",
                exc,
            )


class Channel(kombu_redis.Channel):
    QoS = QoS

    def _brpop_read(self, **options: Any) -> Any:
        try:
            return super()._brpop_read(**options)
        except self.connection_errors:
            if not self._closing:
                raise
            raise Empty() from None  # what close() expects of a BRPOP that got nothing

    def _delete(self, queue: str, *args: Any, **kwargs: Any) -> None:
        try:
            super()._delete(queue, *args, **kwargs)
        except self.connection_errors:
            if not self._closing:
                raise
            logger.info("queue %s not unbound while closing: the broker is gone", queue)


class Transport(kombu_redis.Transport):
    Channel = Channel
