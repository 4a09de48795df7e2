"""``complete(on_text=...)``: the call is streamed and its text passed on as it arrives, while the
result, the retries and the errors stay those of the unstreamed call. The real SDKs against the
fake server, both wire formats."""

from __future__ import annotations

import pytest

from agents.llm.types import LLMUnavailable, Message, ProviderKind, ToolDefinition
from devkit.fake_server import (
    FakeProviderServer,
    HttpError,
    Reply,
    rate_limited,
    server_error,
    text_reply,
    tool_call_reply,
)
from tests.agents.llm.helpers import MakeProvider

KINDS: list[ProviderKind] = ["openai", "anthropic", "google"]
HELLO = (Message.user("Who is 42?"),)
ANSWER = "Contact 42 is Ada Lovelace, a long-standing client of the agency."
LOOKUP = ToolDefinition(name="crm_get_contact", description="Look a contact up.")
# Cut after the whole text went out (see test_streams.CUTS): before OpenAI's finish chunk, before
# Anthropic's content_block_stop, before Gemini's last chunk (its finishReason).
AFTER_TEXT = {"openai": -3, "anthropic": -3, "google": -1}
# Cut before any text: after OpenAI's role chunk or Anthropic's message_start; Gemini's first
# chunk has text already.
BEFORE_TEXT = {"openai": 1, "anthropic": 1, "google": 0}


class Refused(Exception):
    pass


@pytest.mark.parametrize("kind", KINDS)
def test_the_text_is_passed_piece_by_piece_and_the_result_is_the_unstreamed_one(
    kind: ProviderKind, fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    reply = tool_call_reply("crm_get_contact", {"id": 42}, text=ANSWER, output_tokens=17)
    fake_llm.enqueue(reply, reply)
    provider = make_provider(kind)
    pieces: list[str] = []

    streamed = provider.complete(HELLO, [LOOKUP], on_text=pieces.append)
    plain = provider.complete(HELLO, [LOOKUP])

    assert len(pieces) > 1  # really streamed, not one block
    assert "".join(pieces) == streamed.text == plain.text == ANSWER
    assert [r.stream for r in fake_llm.requests] == [True, False]
    assert [(c.name, c.arguments) for c in streamed.tool_calls] == [("crm_get_contact", {"id": 42})]
    assert streamed.tool_calls[0].raw_arguments == plain.tool_calls[0].raw_arguments
    assert streamed.usage == plain.usage
    assert streamed.usage.output_tokens == 17
    assert (streamed.stop_reason, streamed.attempts) == (plain.stop_reason, 1)


@pytest.mark.parametrize("kind", KINDS)
def test_a_failure_before_any_text_is_retried_streamed_and_nothing_is_passed_twice(
    kind: ProviderKind, fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(
        server_error(503),
        Reply(text="lost", stream_events=BEFORE_TEXT[kind]),
        text_reply(ANSWER),
    )
    pieces: list[str] = []

    completion = make_provider(kind).complete(HELLO, on_text=pieces.append)

    assert completion.text == "".join(pieces) == ANSWER
    assert completion.attempts == 3
    assert [r.stream for r in fake_llm.requests] == [True, True, True]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("error_event", [False, True], ids=["cut", "error_event"])
def test_a_stream_that_fails_after_its_text_is_retried_like_an_unstreamed_call(
    kind: ProviderKind,
    error_event: bool,
    fake_llm: FakeProviderServer,
    make_provider: MakeProvider,
) -> None:
    """Unlike ``stream()``, which raises once it forwarded anything: the retry is made
    unstreamed, so the caller gets no text twice, and the reply is the retry's whole one."""
    # Anthropic's overloaded_error; the others' error events name a 500 or a 503.
    status = {"openai": 500, "anthropic": 529, "google": 503}[kind]
    failure = Reply(
        text=ANSWER,
        stream_events=AFTER_TEXT[kind],
        stream_error=HttpError(status) if error_event else None,
    )
    fake_llm.enqueue(failure, text_reply("The second attempt's whole answer."))
    pieces: list[str] = []

    completion = make_provider(kind).complete(HELLO, on_text=pieces.append)

    assert completion.text == "The second attempt's whole answer."
    assert completion.attempts == 2
    assert "".join(pieces) == ANSWER  # the failed attempt's text, passed once, then void
    assert [r.stream for r in fake_llm.requests] == [True, False]


@pytest.mark.parametrize("kind", KINDS)
def test_a_stream_cut_with_no_retry_left_fails_like_the_unstreamed_call(
    kind: ProviderKind, fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(Reply(text=ANSWER, stream_events=AFTER_TEXT[kind]), rate_limited(0.001))
    pieces: list[str] = []

    with pytest.raises(LLMUnavailable) as caught:
        make_provider(kind, max_retries=0).complete(HELLO, on_text=pieces.append)

    assert "stream ended early" in str(caught.value)
    assert caught.value.attempts == 1
    assert "".join(pieces) == ANSWER
    assert fake_llm.request_count == 1


@pytest.mark.parametrize("kind", KINDS)
def test_before_send_runs_once_before_a_streamed_call_and_what_it_raises_ends_it(
    kind: ProviderKind, fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(server_error(), text_reply(ANSWER))
    provider = make_provider(kind)
    seen_by_server: list[int] = []
    pieces: list[str] = []

    completion = provider.complete(
        HELLO,
        before_send=lambda: seen_by_server.append(fake_llm.request_count),
        on_text=pieces.append,
    )
    assert (completion.text, completion.attempts, seen_by_server) == (ANSWER, 2, [0])

    def refuse() -> None:
        raise Refused("the run was cancelled")

    with pytest.raises(Refused):
        provider.complete(HELLO, before_send=refuse, on_text=pieces.append)
    assert fake_llm.request_count == 2  # nothing more went out
    assert "".join(pieces) == ANSWER
