"""Whether anyone watches: which Channels groups have a listener, kept fresh in the background
for the process's runs (:class:`Listeners`), so that nobody's run streams to no one, and none pays
a Redis round trip per model call to find out.

The watch is one instance per process, ``listeners``, looked up here by its users (the runtime's
streaming, tests and benchmarks replace it or :func:`has_listeners` on this module).
"""

from __future__ import annotations

import logging
import threading
import time

import redis
from channels.layers import get_channel_layer
from django.conf import settings
from redis.backoff import NoBackoff
from redis.retry import Retry

from core.realtime.publishing import _group_channel, _pubsub_target

logger = logging.getLogger(__name__)


# Whether anyone listens to a group (a run's watchers). Asked before every model call, so the
# answer for a running run's group is kept fresh by a background thread and read from memory.
LISTENERS_TIMEOUT = 0.25  # seconds for connecting to Redis and for its answer
LISTENERS_RETRY_AFTER = 10.0  # seconds a run does not ask itself after Redis failed to answer


class Listeners:
    """Which groups have a listener, for the groups this process's runs are interested in.

    One background thread asks Redis about all of them in one command (``PUBSUB NUMSUB`` on the
    channels the pub/sub layer subscribes per group; a subscription of any server process
    counts) every ``AGENTDESK_TOKEN_WATCH_SECONDS`` while any is registered, so the answer a
    run reads before a model call is at most that old and costs it a dictionary lookup. A
    group's first question, before the thread answered it, is asked at once (one round trip
    per run, not per call). Redis not answering within ``LISTENERS_TIMEOUT`` means "nobody
    listens" (logged once per outage); a run then does not ask again for
    ``LISTENERS_RETRY_AFTER`` seconds, the thread asks on. ``target``: the Redis URL and the
    layer's channel prefix; by default the channel layer's (another layer: nobody listens).
    """

    def __init__(self, target: tuple[str, str] | None = None) -> None:
        self._lock = threading.Lock()
        self._interest = threading.Condition(self._lock)
        self._target = target
        self._ready = False
        self._client: redis.Redis | None = None
        self._prefix = ""
        self._registered: dict[str, int] = {}  # group -> registrations (runs)
        self._heard: dict[str, bool] = {}  # group -> the last answer, for registered groups
        self._down_until = 0.0  # time.monotonic() before which a run does not ask Redis
        self._thread: threading.Thread | None = None
        self.asks = 0  # commands sent to Redis (benchmarks)

    # --- what runs call ---------------------------------------------------------------------
    def register(self, group: str) -> None:
        with self._lock:
            self._registered[group] = self._registered.get(group, 0) + 1
            self._interest.notify()
        self._ensure_thread()

    def unregister(self, group: str) -> None:
        with self._lock:
            left = self._registered.get(group, 0) - 1
            if left > 0:
                self._registered[group] = left
            else:
                self._registered.pop(group, None)
                self._heard.pop(group, None)

    def listened(self, group: str) -> bool:
        heard = self._heard.get(group)
        if heard is not None:
            return heard
        if time.monotonic() < self._down_until:
            return False
        answer = self._ask([group])
        if answer is None:
            return False
        with self._lock:
            if group in self._registered:
                self._heard.setdefault(group, answer[0])  # unless the thread answered since
        return answer[0]

    # --- asking Redis -----------------------------------------------------------------------
    def _setup(self) -> None:
        with self._lock:
            if self._ready:
                return
            target = self._target or _pubsub_target(get_channel_layer())
            if target is None:
                logger.warning(
                    "model calls are not streamed to watchers: that needs the Redis pub/sub "
                    "channel layer on one Redis (CHANNEL_LAYERS)"
                )
            else:
                url, self._prefix = target
                # No retries: a Redis that does not answer at once means "nobody listens".
                self._client = redis.Redis.from_url(
                    url,
                    socket_timeout=LISTENERS_TIMEOUT,
                    socket_connect_timeout=LISTENERS_TIMEOUT,
                    retry=Retry(NoBackoff(), 0),
                )
            self._ready = True

    def _ask(self, groups: list[str]) -> list[bool] | None:
        """Whether each of ``groups`` has a listener now (one round trip), or None."""
        if not self._ready:
            self._setup()
        if self._client is None:
            return None
        self.asks += 1
        try:
            answer = self._client.pubsub_numsub(*(_group_channel(self._prefix, g) for g in groups))
        except redis.RedisError as exc:
            with self._lock:
                first = self._down_until == 0.0
                self._down_until = time.monotonic() + LISTENERS_RETRY_AFTER
                for group in groups:
                    if group in self._registered:
                        self._heard[group] = False
            if first:  # once per outage, not once per model call
                logger.warning(
                    "cannot tell whether anyone watches (Redis: %s): model calls are not "
                    "streamed until it answers",
                    exc,
                )
            return None
        if self._down_until:
            with self._lock:
                self._down_until = 0.0
            logger.info("Redis answers again: model calls are streamed to their watchers")
        return [int(count) > 0 for _, count in answer]

    def _ensure_thread(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        with self._lock:
            if self._thread is None or not self._thread.is_alive():  # (a forked child has none)
                self._thread = threading.Thread(
                    target=self._refresh_forever, name="realtime-listeners", daemon=True
                )
                self._thread.start()

    def _refresh_forever(self) -> None:
        while True:
            with self._lock:
                while not self._registered:
                    self._interest.wait()
                groups = list(self._registered)
            try:
                answer = self._ask(groups)
            except Exception:  # this thread must outlive anything
                logger.exception("asking Redis for listeners failed")
                answer = None
            if answer is not None:
                with self._lock:
                    for group, heard in zip(groups, answer, strict=True):
                        if group in self._registered:
                            self._heard[group] = heard
            time.sleep(settings.AGENTDESK_TOKEN_WATCH_SECONDS)


listeners = Listeners()


def has_listeners(group: str) -> bool:
    """Whether a consumer listens to ``group``: the latest answer if a run registered the group
    (``listeners.register``), else one Redis round trip (see :class:`Listeners`)."""
    return listeners.listened(group)
