"""Broadcasts reach Channels groups through real Redis, only after the transaction commits."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from channels.layers import get_channel_layer
from django.db import transaction

from core import realtime
from core.realtime import publishing

pytestmark = pytest.mark.django_db(transaction=False)


async def _receive(layer: Any, channel: str, timeout: float = 3.0) -> dict[str, Any] | None:
    try:
        return await asyncio.wait_for(layer.receive(channel), timeout)
    except TimeoutError:
        return None


def test_broadcast_is_sent_after_commit_and_dropped_on_rollback(
    django_capture_on_commit_callbacks: Any,
) -> None:
    async def scenario() -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add("execution.test-rt", channel)
        try:

            def rolled_back() -> None:
                try:
                    with transaction.atomic():
                        realtime.broadcast_on_commit(["execution.test-rt"], {"type": "x", "n": 1})
                        raise RuntimeError("roll back")
                except RuntimeError:
                    pass

            def committed() -> None:
                with django_capture_on_commit_callbacks(execute=True):
                    realtime.broadcast_on_commit(["execution.test-rt"], {"type": "x", "n": 2})
                realtime.flush()

            await asyncio.to_thread(rolled_back)
            await asyncio.to_thread(committed)
            first = await _receive(layer, channel)
            second = await _receive(layer, channel, timeout=0.5)
            return first, second
        finally:
            await layer.group_discard("execution.test-rt", channel)

    first, second = asyncio.run(scenario())
    assert first == {"type": "x", "n": 2}
    assert second is None


def test_a_message_finding_the_publisher_idle_goes_at_once_and_followers_share_a_window() -> None:
    publisher = publishing._Publisher()

    def put_later(*items: Any, delay: float = 0.02) -> None:
        for item in items:
            time.sleep(delay)
            publisher._queue.put(item)

    publisher._queue.put("first")
    threading.Thread(target=put_later, args=("late",), kwargs={"delay": 0.5}).start()
    assert publisher._next_batch(5.0) == ["first"]  # nothing sent lately: no wait for "late"
    assert publisher._next_batch(0.0) == ["late"]

    publisher._queue.put("second")
    threading.Thread(target=put_later, args=("third",)).start()
    assert publisher._next_batch(0.2) == ["second", "third"]  # within the window of "late"

    done = threading.Event()
    publisher._queue.put("fourth")
    threading.Thread(target=put_later, args=(done,)).start()
    started = time.monotonic()
    assert publisher._next_batch(5.0) == ["fourth", done]
    assert time.monotonic() - started < 2.0  # the flush request did not wait out the window

    publisher._queue.put("alone")
    threading.Thread(target=put_later, args=("later",)).start()
    assert publisher._next_batch(0.0) == ["alone"]  # no window: what is queued, at once
    assert publisher._next_batch(0.0) == ["later"]


def test_redis_down_is_one_warning_per_outage_and_a_bug_keeps_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    failures = publishing._FailureLog()
    with caplog.at_level("WARNING", logger="core.realtime"):
        for _ in range(5):
            failures.failed(ConnectionRefusedError("refused"), 3)
        failures.succeeded()
        failures.failed(RuntimeError("bug"), 2)
    records = [(r.levelname, r.getMessage(), r.exc_info is not None) for r in caplog.records]
    assert records == [
        ("WARNING", "live updates are dropped until Redis answers again: refused", False),
        ("WARNING", "live updates are sent again (Redis answers)", False),
        ("ERROR", "broadcast of 2 messages failed", True),
    ]
