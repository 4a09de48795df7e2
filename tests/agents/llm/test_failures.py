"""429 / 5xx / hangs / refusals: retried with backoff where it can help, then one typed error."""

from __future__ import annotations

import pytest

from agents.llm.types import (
    LLMBadRequest,
    LLMConfigurationError,
    LLMDeadlineExceeded,
    LLMRateLimited,
    LLMUnavailable,
    Message,
    ProviderKind,
    StreamDone,
    TextDelta,
)
from devkit.fake_server import (
    FakeProviderServer,
    HttpError,
    hang,
    rate_limited,
    server_error,
    text_reply,
)
from tests.agents.llm.helpers import MakeProvider

KINDS: list[ProviderKind] = ["openai", "anthropic", "google"]
HELLO = [Message.user("hello")]


@pytest.mark.parametrize("kind", KINDS)
def test_rate_limit_is_retried_after_the_retry_after_delay_then_succeeds(
    kind: ProviderKind,
    fake_llm: FakeProviderServer,
    make_provider: MakeProvider,
    sleeps: list[float],
) -> None:
    fake_llm.enqueue(rate_limited(retry_after=7), text_reply("after the wait"))

    completion = make_provider(kind, sleep=sleeps.append).complete(HELLO)

    assert completion.text == "after the wait"
    assert completion.attempts == 2
    assert fake_llm.request_count == 2
    assert sleeps == [7.0]  # the server's Retry-After, not our own backoff


@pytest.mark.parametrize("kind", KINDS)
def test_retry_after_is_capped(
    kind: ProviderKind,
    fake_llm: FakeProviderServer,
    make_provider: MakeProvider,
    sleeps: list[float],
) -> None:
    fake_llm.enqueue(rate_limited(retry_after=3600), text_reply("ok"))

    make_provider(kind, sleep=sleeps.append, retry_after_cap=30.0).complete(HELLO)

    assert sleeps == [30.0]


@pytest.mark.parametrize("kind", KINDS)
def test_rate_limit_that_outlasts_the_retries_raises_llm_rate_limited(
    kind: ProviderKind, fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(*[rate_limited(retry_after=0.001)] * 2)

    with pytest.raises(LLMRateLimited) as caught:
        make_provider(kind, max_retries=1).complete(HELLO)

    assert caught.value.attempts == 2
    assert caught.value.status_code == 429
    assert caught.value.retry_after == pytest.approx(0.001)
    assert fake_llm.request_count == 2


@pytest.mark.parametrize("kind", KINDS)
def test_persistent_server_errors_raise_llm_unavailable_after_all_attempts(
    kind: ProviderKind,
    fake_llm: FakeProviderServer,
    make_provider: MakeProvider,
    sleeps: list[float],
) -> None:
    fake_llm.enqueue(*[server_error(500)] * 3, text_reply("never reached"))

    with pytest.raises(LLMUnavailable) as caught:
        make_provider(kind, max_retries=2, sleep=sleeps.append).complete(HELLO)

    assert caught.value.attempts == 3
    assert caught.value.status_code == 500
    assert "after 3 attempts" in str(caught.value)
    assert fake_llm.request_count == 3
    assert len(sleeps) == 2
    assert sleeps[1] > sleeps[0]  # exponential, from the configured base


@pytest.mark.parametrize("kind", KINDS)
def test_a_hung_provider_times_out_and_raises_llm_unavailable(
    kind: ProviderKind, fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(hang(seconds=30), hang(seconds=30))

    with pytest.raises(LLMUnavailable) as caught:
        make_provider(kind, timeout=0.3, max_retries=1).complete(HELLO)

    assert "did not answer within 0.3 s" in str(caught.value)
    assert caught.value.attempts == 2
    assert fake_llm.request_count == 2


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("streamed", [False, True])
def test_a_call_given_a_time_limit_ends_within_it_whatever_its_own_timeout_and_retries(
    kind: ProviderKind,
    streamed: bool,
    fake_llm: FakeProviderServer,
    make_provider: MakeProvider,
) -> None:
    """The runtime passes the run's remaining time: a hung provider cannot hold the run for
    the configured timeout x attempts (here 3 x 30 s)."""
    fake_llm.enqueue(hang(seconds=30), hang(seconds=30), hang(seconds=30))
    provider = make_provider(kind, timeout=30.0, max_retries=2)

    def call() -> object:
        if streamed:
            return list(provider.stream(HELLO, timeout=0.4))
        return provider.complete(HELLO, timeout=0.4)

    with pytest.raises(LLMDeadlineExceeded) as caught:
        call()

    assert "did not come within the time the run had left (0.4 s)" in str(caught.value)
    assert not caught.value.retryable


@pytest.mark.parametrize("kind", KINDS)
def test_a_timeout_then_a_reply_succeeds(
    kind: ProviderKind, fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(hang(seconds=30), text_reply("back"))

    completion = make_provider(kind, timeout=0.3).complete(HELLO)

    assert completion.text == "back"
    assert completion.attempts == 2


@pytest.mark.parametrize("kind", KINDS)
def test_a_refused_request_is_not_retried(
    kind: ProviderKind, fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(HttpError(400, message="messages: field required"), text_reply("unused"))

    with pytest.raises(LLMBadRequest) as caught:
        make_provider(kind).complete(HELLO)

    assert "messages: field required" in str(caught.value)
    assert fake_llm.request_count == 1


@pytest.mark.parametrize("kind", KINDS)
def test_a_rejected_key_is_a_configuration_error_without_retries(
    kind: ProviderKind, fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(HttpError(401, message="invalid x-api-key"), text_reply("unused"))

    with pytest.raises(LLMConfigurationError) as caught:
        make_provider(kind).complete(HELLO)

    assert "rejected the API key" in str(caught.value)
    assert fake_llm.request_count == 1


@pytest.mark.parametrize("kind", KINDS)
def test_stream_retries_a_failure_before_the_first_event(
    kind: ProviderKind, fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(server_error(503), rate_limited(retry_after=0.001), text_reply("streamed ok"))

    events = list(make_provider(kind).stream(HELLO))

    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "streamed ok"
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.completion.attempts == 3
    assert fake_llm.request_count == 3


@pytest.mark.parametrize("kind", KINDS)
def test_unreachable_provider_raises_llm_unavailable(
    kind: ProviderKind, fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    provider = make_provider(kind, max_retries=1)
    fake_llm.stop()  # nothing listens on the port any more

    with pytest.raises(LLMUnavailable) as caught:
        provider.complete(HELLO)

    assert caught.value.attempts == 2
