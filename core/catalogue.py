"""A per-process cache for what every run reads and staff rarely change (tools, risk rules,
prices, provider settings): each entry is reused for AGENTDESK_CATALOGUE_CACHE_SECONDS, so an
edit in the admin reaches new runs within that time. 0 reads the database every time."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable

from django.conf import settings


class CatalogueCache[V]:
    def __init__(self) -> None:
        self._entries: dict[Hashable, tuple[float, V]] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, load: Callable[[], V]) -> V:
        """The cached value for ``key``, or ``load()``'s (outside the lock: a slow read must
        not hold up other threads; two threads may both load once, harmlessly)."""
        now = time.monotonic()
        with self._lock:
            cached = self._entries.get(key)
        if cached and now - cached[0] < settings.AGENTDESK_CATALOGUE_CACHE_SECONDS:
            return cached[1]
        value = load()
        with self._lock:
            self._entries[key] = (now, value)
        return value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
