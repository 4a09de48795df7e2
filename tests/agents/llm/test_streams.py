"""Streams that stop early or fail right after they start: a partial reply is never passed off as
a whole one, and a failure before any content is retried without the caller seeing it."""

from __future__ import annotations

import pytest

from agents.llm.types import (
    LLMUnavailable,
    Message,
    ProviderKind,
    StreamDone,
    StreamEvent,
    TextDelta,
    Usage,
    UsageUpdate,
)
from devkit.fake_server import FakeProviderServer, HttpError, Reply, text_reply
from tests.agents.llm.helpers import MakeProvider

HELLO = (Message.user("Who is 42?"),)
ANSWER = "Contact 42 is Ada Lovelace, a long-standing client."

# Where a stream of ANSWER is cut, counted from its end. OpenAI: [... text chunks, finish chunk,
# usage chunk, [DONE]]; Anthropic: [... content_block_stop, message_delta, message_stop].
CUTS: list[tuple[ProviderKind, int]] = [
    ("openai", -3),  # before the finish chunk
    ("openai", -2),  # after it, before the usage chunk OpenAI always sends when asked
    ("anthropic", -3),  # before the text block's end
    ("anthropic", -1),  # before message_stop only
    ("google", -1),  # before the chunk with the finishReason (Gemini: [... text chunks, last])
]


@pytest.mark.parametrize(("kind", "cut"), CUTS)
def test_a_stream_cut_before_its_final_event_raises_instead_of_a_partial_reply(
    kind: ProviderKind, cut: int, fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(Reply(text=ANSWER, stream_events=cut), text_reply("never asked for"))
    events: list[StreamEvent] = []

    with pytest.raises(LLMUnavailable) as caught:
        events.extend(make_provider(kind).stream(HELLO))

    assert "stream ended early" in str(caught.value)
    assert not any(isinstance(e, StreamDone) for e in events)
    # The text already went out to the caller: a retry would repeat it, so none is made.
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == ANSWER
    assert caught.value.attempts == 1
    assert fake_llm.request_count == 1


def test_an_openai_compatible_stream_without_a_usage_chunk_is_whole(
    fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    """Local servers may not honour include_usage: their finish chunk ends the reply."""
    fake_llm.enqueue(Reply(text=ANSWER, stream_events=-2))  # no usage chunk, no [DONE]

    events = list(make_provider("openai_compatible").stream(HELLO))

    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.completion.text == ANSWER
    assert done.completion.stop_reason == "end"


@pytest.mark.parametrize(("kind", "cut"), [("openai", 1), ("anthropic", 1), ("google", 0)])
def test_a_stream_cut_before_any_content_is_retried_unseen(
    kind: ProviderKind, cut: int, fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    # OpenAI's first chunk carries only the role; Anthropic's first event is message_start;
    # Gemini's first chunk has content already: cut before it.
    fake_llm.enqueue(
        Reply(text="lost", input_tokens=999, stream_events=cut),
        text_reply(ANSWER, input_tokens=12, output_tokens=8),
    )

    events = list(make_provider(kind).stream(HELLO))

    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.completion.text == ANSWER
    assert done.completion.attempts == 2
    usage = [e.usage.input_tokens for e in events if isinstance(e, UsageUpdate)]
    assert usage
    assert set(usage) == {12}  # the abandoned attempt's counts never reached the caller
    assert done.completion.usage == Usage(input_tokens=12, output_tokens=8)


def test_anthropic_overloaded_right_after_message_start_is_retried(
    fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(
        Reply(
            text="lost",
            input_tokens=999,
            stream_events=1,  # message_start, then the error event
            stream_error=HttpError(529, message="Overloaded"),
        ),
        text_reply(ANSWER, input_tokens=12),
    )

    events = list(make_provider("anthropic").stream(HELLO))

    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.completion.text == ANSWER
    assert done.completion.attempts == 2
    usage = [e.usage.input_tokens for e in events if isinstance(e, UsageUpdate)]
    assert usage
    assert 999 not in usage  # the abandoned attempt's counts never reached the caller
    assert fake_llm.request_count == 2


def test_anthropic_overloaded_after_text_went_out_is_not_retried(
    fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(
        Reply(text=ANSWER, stream_events=5, stream_error=HttpError(529, message="Overloaded")),
        text_reply("never asked for"),
    )
    events: list[StreamEvent] = []

    with pytest.raises(LLMUnavailable) as caught:
        events.extend(make_provider("anthropic").stream(HELLO))

    assert "Overloaded" in str(caught.value)
    assert any(isinstance(e, TextDelta) for e in events)
    assert fake_llm.request_count == 1
