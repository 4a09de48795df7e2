"""Replies as OpenAI-compatible servers and gateways really send them: tool calls without an id
or a type, arguments as an object, malformed bodies, replies cut off by the token limit. The
caller gets normalised tool calls or an `LLMError`, never an SDK model's AttributeError."""

from __future__ import annotations

import json

import pytest

from agents.llm.base import Provider
from agents.llm.types import (
    Completion,
    LLMUnavailable,
    Message,
    ProviderKind,
    StreamDone,
    ToolCallComplete,
    ToolDefinition,
)
from devkit.fake_server import (
    FakeProviderServer,
    RawReply,
    Reply,
    ScriptedToolCall,
    text_reply,
)
from tests.agents.llm.helpers import MakeProvider

KINDS: list[ProviderKind] = ["openai", "anthropic", "google"]
# Gemini's function-call arguments are an object, never cut-off JSON text.
TEXT_ARGUMENT_KINDS: list[ProviderKind] = ["openai", "anthropic"]
NOTE = ToolDefinition(name="crm_add_note", description="Add a note to a contact")
QUESTION = (Message.user("Note that 42 called."),)
ARGUMENTS = {"contact_id": 42, "body": "Called about the renewal."}


def _reply(provider: Provider, *, streamed: bool) -> Completion:
    if not streamed:
        return provider.complete(QUESTION, [NOTE])
    events = list(provider.stream(QUESTION, [NOTE]))
    done = events[-1]
    assert isinstance(done, StreamDone)
    # What the stream announced call by call is what the completion carries.
    assert tuple(e.tool_call for e in events if isinstance(e, ToolCallComplete)) == (
        done.completion.tool_calls
    )
    return done.completion


@pytest.mark.parametrize("streamed", [False, True])
def test_openai_tool_calls_without_an_id_get_fresh_distinct_ids(
    streamed: bool, fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(
        Reply(
            tool_calls=(
                ScriptedToolCall("crm_add_note", ARGUMENTS, omit_id=True),
                ScriptedToolCall("crm_add_note", ARGUMENTS, omit_id=True),
                ScriptedToolCall("crm_add_note", ARGUMENTS, id=""),
            )
        ),
        text_reply("Noted three times."),
    )
    provider = make_provider("openai")

    first = _reply(provider, streamed=streamed)

    ids = [call.id for call in first.tool_calls]
    assert len(ids) == 3
    assert all(call_id.startswith("call_") and len(call_id) > 20 for call_id in ids)
    assert len(set(ids)) == 3
    # The ids pair each result with its call: the (order-checking) server accepts the turn.
    results = [Message.tool_result(call_id, "ok") for call_id in ids]
    second = provider.complete([*QUESTION, first.to_message(), *results], [NOTE])
    assert second.text == "Noted three times."
    sent = fake_llm.requests[1].messages[1]["tool_calls"]
    assert [call["id"] for call in sent] == ids


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("streamed", [False, True])
def test_an_id_repeated_within_one_reply_is_replaced_for_the_later_call(
    kind: ProviderKind, streamed: bool, fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(
        Reply(
            tool_calls=(
                ScriptedToolCall("crm_add_note", ARGUMENTS, id="call_0"),
                ScriptedToolCall("crm_add_note", {"contact_id": 7}, id="call_0"),
            )
        )
    )

    completion = _reply(make_provider(kind), streamed=streamed)

    first, second = completion.tool_calls
    assert first.id == "call_0"
    assert second.id.startswith("call_")
    assert second.id != "call_0"
    assert second.arguments == {"contact_id": 7}


def test_openai_tool_call_without_a_type_is_kept(
    fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(
        Reply(tool_calls=(ScriptedToolCall("crm_add_note", ARGUMENTS, id="c1", omit_type=True),))
    )

    completion = make_provider("openai").complete(QUESTION, [NOTE])

    assert [(c.id, c.name, c.arguments) for c in completion.tool_calls] == [
        ("c1", "crm_add_note", ARGUMENTS)
    ]
    assert completion.stop_reason == "tool_calls"


@pytest.mark.parametrize("streamed", [False, True])
def test_openai_arguments_sent_as_an_object_are_accepted(
    streamed: bool, fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(
        Reply(tool_calls=(ScriptedToolCall("crm_add_note", ARGUMENTS, object_arguments=True),))
    )

    completion = _reply(make_provider("openai"), streamed=streamed)

    (call,) = completion.tool_calls
    assert call.arguments == ARGUMENTS
    assert call.arguments_error is None
    assert json.loads(call.raw_arguments) == ARGUMENTS  # kept as text, like any other call


@pytest.mark.parametrize("streamed", [False, True])
def test_anthropic_tool_use_without_an_id_gets_one(
    streamed: bool, fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(
        Reply(
            tool_calls=(
                ScriptedToolCall("crm_add_note", ARGUMENTS, omit_id=True),
                ScriptedToolCall("crm_add_note", ARGUMENTS, omit_id=True),
            )
        ),
        text_reply("Both noted."),
    )
    provider = make_provider("anthropic")

    first = _reply(provider, streamed=streamed)

    ids = [call.id for call in first.tool_calls]
    assert all(call_id.startswith("call_") for call_id in ids)
    assert len(set(ids)) == 2
    results = [Message.tool_result(call_id, "ok") for call_id in ids]
    assert provider.complete([*QUESTION, first.to_message(), *results], [NOTE]).text == (
        "Both noted."
    )


@pytest.mark.parametrize("kind", KINDS)
def test_a_tool_call_without_a_name_is_a_malformed_reply_and_retried(
    kind: ProviderKind, fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(
        Reply(tool_calls=(ScriptedToolCall("", ARGUMENTS),)),
        Reply(tool_calls=(ScriptedToolCall("crm_add_note", ARGUMENTS),)),
    )

    completion = make_provider(kind).complete(QUESTION, [NOTE])

    assert [c.name for c in completion.tool_calls] == ["crm_add_note"]
    assert completion.attempts == 2


@pytest.mark.parametrize("kind", KINDS)
def test_a_streamed_tool_call_without_a_name_raises_once_text_went_out(
    kind: ProviderKind, fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(Reply(text="Noting it.", tool_calls=(ScriptedToolCall("", ARGUMENTS),)))

    with pytest.raises(LLMUnavailable) as caught:
        list(make_provider(kind).stream(QUESTION, [NOTE]))

    assert "malformed response: tool" in str(caught.value)
    assert "has no" in str(caught.value)
    assert fake_llm.request_count == 1


def test_openai_response_without_choices_is_unavailable_and_retried(
    fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    empty = RawReply({"id": "chatcmpl-1", "object": "chat.completion", "model": "m", "choices": []})
    fake_llm.enqueue(empty, text_reply("second time lucky"), empty, empty)
    provider = make_provider("openai", max_retries=1)

    assert provider.complete(QUESTION).attempts == 2
    with pytest.raises(LLMUnavailable) as caught:
        provider.complete(QUESTION)

    assert "malformed response: the response has no choices" in str(caught.value)
    assert caught.value.attempts == 2
    assert fake_llm.request_count == 4


def test_anthropic_message_without_content_is_unavailable(
    fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(
        RawReply({"id": "msg_1", "type": "message", "role": "assistant", "model": "m"}),
        text_reply("whole"),
    )

    completion = make_provider("anthropic").complete(QUESTION)

    assert completion.text == "whole"
    assert completion.attempts == 2


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("streamed", [False, True])
def test_a_tool_calls_stop_without_any_tool_call_is_unavailable_not_an_empty_answer(
    kind: ProviderKind, streamed: bool, fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(Reply(stop="tool_calls"), Reply(stop="tool_calls"))
    provider = make_provider(kind, max_retries=1)

    with pytest.raises(LLMUnavailable) as caught:
        _reply(provider, streamed=streamed)

    assert "but no tool" in str(caught.value)
    assert caught.value.attempts == 2


@pytest.mark.parametrize("kind", TEXT_ARGUMENT_KINDS)
@pytest.mark.parametrize("streamed", [False, True])
def test_a_tool_call_cut_off_by_the_token_limit_reports_max_tokens(
    kind: ProviderKind, streamed: bool, fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    cut = '{"contact_id": 42, "body": "Called ab'
    fake_llm.enqueue(
        Reply(
            text="Noting it.",
            tool_calls=(ScriptedToolCall("crm_add_note", cut),),
            stop="max_tokens",
        )
    )

    completion = _reply(make_provider(kind), streamed=streamed)

    assert completion.stop_reason == "max_tokens"
    assert completion.raw_stop_reason == ("length" if kind == "openai" else "max_tokens")
    (call,) = completion.tool_calls  # still there: the runtime decides what to do with it
    assert call.raw_arguments == cut
    assert call.arguments == {}
    assert call.arguments_error is not None
    assert "not valid JSON" in call.arguments_error


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("streamed", [False, True])
def test_text_cut_off_by_the_token_limit_reports_max_tokens(
    kind: ProviderKind, streamed: bool, fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(Reply(text="Contact 42 is Ada, who", stop="max_tokens"))

    completion = _reply(make_provider(kind), streamed=streamed)

    assert completion.stop_reason == "max_tokens"
    assert completion.text == "Contact 42 is Ada, who"
    assert completion.tool_calls == ()
