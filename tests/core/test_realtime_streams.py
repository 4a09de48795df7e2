"""Text streams (sent at once, batched however fast they grow, ahead of what follows them) and the
"does anyone listen to this group" question, against real Redis."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import Any

import pytest
import redis
from channels.layers import get_channel_layer

from core import realtime
from core.realtime import listening, publishing


def _subscription(group: str, *, pattern: bool = False) -> Any:
    target = publishing._pubsub_target(get_channel_layer())
    assert target is not None
    url, prefix = target
    pubsub = redis.Redis.from_url(url).pubsub(ignore_subscribe_messages=True)
    channel = publishing._group_channel(prefix, group)
    (pubsub.psubscribe if pattern else pubsub.subscribe)(channel)
    pubsub.get_message(timeout=2)  # confirmed
    return pubsub


def _received(pubsub: Any, until: str, timeout: float = 5.0) -> list[dict[str, Any]]:
    layer = get_channel_layer()
    messages: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        message = pubsub.get_message(timeout=0.1)
        if message is not None and message["type"] in ("message", "pmessage"):
            messages.append(layer.deserialize(message["data"]))
            if messages[-1]["type"] == until:
                break
    return messages


def test_a_fast_growing_text_goes_out_whole_in_few_messages_ahead_of_what_follows() -> None:
    group = f"execution.test-{uuid.uuid4()}"
    pubsub = _subscription(group)
    pieces = [f"piece {i}, " for i in range(2000)]
    stream = realtime.TextStream([group], {"type": "x.token", "n": 7})
    try:
        for piece in pieces:
            stream.append(piece)
        realtime.broadcast([group], {"type": "x.after"})
        messages = _received(pubsub, until="x.after")
    finally:
        pubsub.close()

    *tokens, after = messages
    assert after == {"type": "x.after"}
    assert {(m["type"], m["n"]) for m in tokens} == {("x.token", 7)}
    assert "".join(m["text"] for m in tokens) == "".join(pieces)
    assert len(tokens) == stream.messages < len(pieces) / 10  # batched, not one per piece


def test_text_appended_while_its_batch_is_sent_goes_with_the_next_one() -> None:
    group = f"execution.test-{uuid.uuid4()}"
    pubsub = _subscription(group)
    stream = realtime.TextStream([group], {"type": "x.token"})
    try:
        stream.append("one ")
        realtime.flush()
        stream.append("two ")
        stream.append("three")
        realtime.flush()
        realtime.broadcast([group], {"type": "x.after"})
        messages = _received(pubsub, until="x.after")
    finally:
        pubsub.close()
    assert [m.get("text") for m in messages] == ["one ", "two three", None]


def test_a_group_has_listeners_while_a_channel_subscription_to_it_exists() -> None:
    group = f"execution.test-{uuid.uuid4()}"
    assert listening.has_listeners(group) is False
    observer = _subscription(group, pattern=True)  # a pattern subscription is no listener
    try:
        assert listening.has_listeners(group) is False
        pubsub = _subscription(group)
        assert listening.has_listeners(group) is True
        pubsub.close()
        deadline = time.monotonic() + 5
        while listening.has_listeners(group) and time.monotonic() < deadline:
            time.sleep(0.01)  # the server drops a closed connection's subscriptions
        assert listening.has_listeners(group) is False
    finally:
        observer.close()


def test_a_registered_groups_listeners_are_kept_fresh_in_the_background(settings: Any) -> None:
    settings.AGENTDESK_TOKEN_WATCH_SECONDS = 0.05
    group = f"execution.test-{uuid.uuid4()}"
    watch = listening.Listeners()
    watch.register(group)
    try:
        assert watch.listened(group) is False
        pubsub = _subscription(group)
        # Two of the thread's asks started since the subscription (an ask is counted when it
        # starts): the first one's answer is in when the second starts, one at a time.
        asks = watch.asks
        deadline = time.monotonic() + 5
        while watch.asks < asks + 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert watch.listened(group) is True  # the thread's answer: reading it asks nothing
        pubsub.close()
        deadline = time.monotonic() + 5
        while watch.listened(group) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert watch.listened(group) is False
    finally:
        watch.unregister(group)


def test_an_unreachable_redis_means_no_listeners_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    watch = listening.Listeners(("redis://127.0.0.1:1/0", "asgi"))  # nothing on port 1
    with caplog.at_level(logging.WARNING, logger="core.realtime"):
        answers = [watch.listened(f"execution.{i}") for i in range(5)]
    assert answers == [False] * 5
    assert watch.asks == 1  # then not again for LISTENERS_RETRY_AFTER
    assert sum("cannot tell whether anyone watches" in r.message for r in caplog.records) == 1


def test_appending_from_many_threads_loses_nothing() -> None:
    group = f"execution.test-{uuid.uuid4()}"
    pubsub = _subscription(group)
    stream = realtime.TextStream([group], {"type": "x.token"})

    def write(tag: str) -> None:
        for i in range(300):
            stream.append(f"{tag}{i};")

    threads = [threading.Thread(target=write, args=(tag,)) for tag in "abcd"]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        realtime.broadcast([group], {"type": "x.after"})
        messages = _received(pubsub, until="x.after")
    finally:
        pubsub.close()
    text = "".join(m.get("text", "") for m in messages)
    assert sorted(text.rstrip(";").split(";")) == sorted(
        f"{tag}{i}" for tag in "abcd" for i in range(300)
    )
