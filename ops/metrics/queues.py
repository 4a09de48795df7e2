"""Each Celery queue's depth and the age of its oldest waiting message, read from Redis when
``/metrics`` is scraped (README "Queues").

kombu's Redis transport keeps a queue as lists, one per priority step, pushes a message at the
head (LPUSH) and takes from the tail (BRPOP): the tail of each list is its oldest message. Its
age comes from the send time every message carries (config/queues.py's ``SENT_AT`` header).
One pipelined round trip per scrape: an LLEN and an LINDEX per list.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import redis
from django.conf import settings

from config.queues import SENT_AT

# kombu's Redis transport keeps a queue's messages of priority p (in 0-9) under
# "<queue>\x06\x16<step>" for the steps 3, 6, 9, and under "<queue>" for the lowest.
_PRIORITY_SEPARATOR = "\x06\x16"
_PRIORITY_STEPS = (0, 3, 6, 9)


@dataclass(frozen=True)
class QueueState:
    depth: int
    # Seconds since the oldest waiting message was sent: 0 when none waits, None when those
    # waiting do not say when they were sent (sent by a process without the header).
    oldest_age_seconds: float | None


def queue_names() -> list[str]:
    """The declared queues (``CELERY_TASK_QUEUES``), and the default queue if it is not one."""
    from config.celery_app import app  # noqa: PLC0415 - the Celery app loads the settings

    declared = [str(getattr(queue, "name", queue)) for queue in app.conf.task_queues or ()]
    return list(dict.fromkeys([*declared, str(app.conf.task_default_queue)]))


def read() -> dict[str, QueueState]:
    from config.celery_app import app  # noqa: PLC0415

    prefix = str((app.conf.broker_transport_options or {}).get("global_keyprefix", ""))
    names = queue_names()
    client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1)
    try:
        pipe = client.pipeline(transaction=False)
        for queue in names:
            for step in _PRIORITY_STEPS:
                key = prefix + (queue if step == 0 else f"{queue}{_PRIORITY_SEPARATOR}{step}")
                pipe.llen(key)
                pipe.lindex(key, -1)
        replies = pipe.execute()
    finally:
        client.close()
    now = time.time()
    per_queue = 2 * len(_PRIORITY_STEPS)
    states: dict[str, QueueState] = {}
    for index, queue in enumerate(names):
        mine = replies[index * per_queue : (index + 1) * per_queue]
        depth = sum(int(length) for length in mine[0::2])
        sent = [
            at for tail in mine[1::2] if tail is not None and (at := _sent_at(tail)) is not None
        ]
        if depth == 0:
            oldest: float | None = 0.0
        elif sent:
            oldest = max(0.0, now - min(sent))  # (another host's clock may be ahead)
        else:
            oldest = None
        states[queue] = QueueState(depth=depth, oldest_age_seconds=oldest)
    return states


def _sent_at(raw: bytes) -> float | None:
    try:
        value = json.loads(raw)["headers"][SENT_AT]
    except (ValueError, KeyError, TypeError):
        return None
    return float(value) if isinstance(value, int | float) else None
