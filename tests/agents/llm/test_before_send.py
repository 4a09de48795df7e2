"""The caller's ``before_send`` hook: run once, after the request is built and before it goes
out; what it raises ends the call unchanged (not wrapped, not retried); its time is not the
model's latency. The real SDKs against the fake server, both wire formats."""

from __future__ import annotations

import time

import pytest

from agents.llm.types import Message, ProviderKind
from devkit.fake_server import FakeProviderServer, server_error, text_reply
from tests.agents.llm.helpers import MakeProvider

KINDS: list[ProviderKind] = ["openai", "anthropic", "google"]
HELLO = [Message.user("hello")]


class Refused(Exception):
    pass


@pytest.mark.parametrize("kind", KINDS)
def test_the_hook_runs_once_before_the_request_and_is_not_the_models_latency(
    kind: ProviderKind, fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(server_error(), text_reply("answered"))  # one retry
    seen_by_server: list[int] = []

    def hook() -> None:
        seen_by_server.append(fake_llm.request_count)
        time.sleep(0.5)

    started = time.monotonic()
    completion = make_provider(kind).complete(HELLO, before_send=hook)
    elapsed_ms = (time.monotonic() - started) * 1000

    assert completion.text == "answered"
    assert completion.attempts == 2
    assert seen_by_server == [0]  # once, before the first request reached the server
    assert elapsed_ms >= 500
    assert completion.latency_ms < elapsed_ms - 400  # the hook's half second is not counted


@pytest.mark.parametrize("kind", KINDS)
def test_what_the_hook_raises_ends_the_call_unchanged_and_nothing_is_sent(
    kind: ProviderKind, fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(text_reply("never asked for"))
    provider = make_provider(kind, max_retries=2)

    def hook() -> None:
        raise Refused("the run was cancelled")

    with pytest.raises(Refused, match="cancelled"):
        provider.complete(HELLO, before_send=hook)
    assert fake_llm.request_count == 0  # not sent, not retried

    # The next call on the same client has no hook left over.
    assert provider.complete(HELLO).text == "never asked for"
