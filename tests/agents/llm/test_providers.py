"""Both providers through the real SDK clients against the fake server, for both wire formats."""

from __future__ import annotations

import pytest

from agents.llm.types import (
    Completion,
    Message,
    ProviderKind,
    StreamDone,
    StreamEvent,
    TextDelta,
    ToolCallComplete,
    ToolCallDelta,
    ToolDefinition,
    Usage,
    UsageUpdate,
)
from devkit.fake_server import (
    FakeProviderServer,
    Reply,
    ScriptedToolCall,
    malformed_tool_call_reply,
    text_reply,
    tool_call_reply,
)
from tests.agents.llm.helpers import MakeProvider

KINDS: list[ProviderKind] = ["openai", "anthropic", "google"]
# The wires whose function-call arguments are JSON text: Gemini's are an object, and the API
# answers a call it could not form with finishReason MALFORMED_FUNCTION_CALL instead
# (tests/agents/llm/test_google_provider.py).
TEXT_ARGUMENT_KINDS: list[ProviderKind] = ["openai", "anthropic"]
USAGE_FIELD = {"openai": "usage", "anthropic": "usage", "google": "usageMetadata"}

GET_CONTACT = ToolDefinition(
    name="crm_get_contact",
    description="Look up a contact by id",
    parameters={
        "type": "object",
        "properties": {"id": {"type": "integer"}},
        "required": ["id"],
    },
)
CONVERSATION = (Message.system("You are the agency's assistant."), Message.user("Who is 42?"))


def _done(events: list[StreamEvent]) -> Completion:
    assert isinstance(events[-1], StreamDone)
    return events[-1].completion


@pytest.mark.parametrize("kind", KINDS)
def test_complete_returns_text_usage_and_end_stop_reason(
    kind: ProviderKind, fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(text_reply("Contact 42 is Ada.", input_tokens=120, output_tokens=9))

    completion = make_provider(kind).complete(CONVERSATION)

    assert completion.text == "Contact 42 is Ada."
    assert completion.tool_calls == ()
    assert completion.stop_reason == "end"
    assert completion.usage == Usage(input_tokens=120, output_tokens=9)
    assert completion.model == "fake-model"
    assert completion.provider == kind
    assert completion.attempts == 1
    assert completion.raw[USAGE_FIELD[kind]]  # the provider's response, for the step's record


@pytest.mark.parametrize("kind", KINDS)
def test_complete_parses_tool_calls_into_dict_arguments(
    kind: ProviderKind, fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(
        Reply(
            text="Looking it up.",
            tool_calls=(
                ScriptedToolCall("crm_get_contact", {"id": 42}, id="call-a"),
                ScriptedToolCall("crm_add_note", {"contact_id": 42, "body": "hi"}, id="call-b"),
            ),
        )
    )

    completion = make_provider(kind).complete(CONVERSATION, [GET_CONTACT])

    assert completion.stop_reason == "tool_calls"
    assert completion.text == "Looking it up."
    assert [(c.id, c.name, c.arguments) for c in completion.tool_calls] == [
        ("call-a", "crm_get_contact", {"id": 42}),
        ("call-b", "crm_add_note", {"contact_id": 42, "body": "hi"}),
    ]
    assert all(c.arguments_error is None for c in completion.tool_calls)


@pytest.mark.parametrize("kind", KINDS)
def test_stream_reassembles_text_and_reports_usage(
    kind: ProviderKind, fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(text_reply("Contact 42 is Ada Lovelace.", input_tokens=50, output_tokens=7))

    events = list(make_provider(kind).stream(CONVERSATION))

    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 1  # really streamed, not one block
    assert "".join(deltas) == "Contact 42 is Ada Lovelace."
    completion = _done(events)
    assert completion.text == "Contact 42 is Ada Lovelace."
    assert completion.usage == Usage(input_tokens=50, output_tokens=7)
    assert [e for e in events if isinstance(e, UsageUpdate)][-1].usage == completion.usage
    assert fake_llm.requests[0].stream


@pytest.mark.parametrize("kind", KINDS)
def test_stream_reassembles_tool_call_arguments_from_deltas(
    kind: ProviderKind, fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    arguments = {"contact_id": 42, "body": "Called about the renewal; wants a quote by Friday."}
    fake_llm.enqueue(tool_call_reply("crm_add_note", arguments, text="Noting it."))

    events = list(make_provider(kind).stream(CONVERSATION, [GET_CONTACT]))

    pieces = [e.arguments_delta for e in events if isinstance(e, ToolCallDelta)]
    # Gemini streams a call whole, in one chunk; the others its arguments' JSON in pieces.
    assert len([p for p in pieces if p]) == 1 if kind == "google" else len(pieces) > 1
    completed = [e.tool_call for e in events if isinstance(e, ToolCallComplete)]
    assert [(c.name, c.arguments) for c in completed] == [("crm_add_note", arguments)]
    completion = _done(events)
    assert completion.tool_calls == tuple(completed)
    assert completion.stop_reason == "tool_calls"
    assert completion.text == "Noting it."


@pytest.mark.parametrize("kind", TEXT_ARGUMENT_KINDS)
@pytest.mark.parametrize("streamed", [False, True])
def test_malformed_tool_arguments_become_an_arguments_error_not_an_exception(
    kind: ProviderKind, streamed: bool, fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(malformed_tool_call_reply("crm_get_contact", '{"id": 42, "note": '))
    provider = make_provider(kind)

    if streamed:
        completion = _done(list(provider.stream(CONVERSATION, [GET_CONTACT])))
    else:
        completion = provider.complete(CONVERSATION, [GET_CONTACT])

    (call,) = completion.tool_calls
    assert call.name == "crm_get_contact"
    assert call.arguments == {}
    assert call.raw_arguments == '{"id": 42, "note": '
    assert call.arguments_error is not None
    assert "not valid JSON" in call.arguments_error


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("streamed", [False, True])
def test_cache_tokens_are_reported_separately_from_input(
    kind: ProviderKind, streamed: bool, fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(
        text_reply(
            "ok", input_tokens=30, output_tokens=4, cache_read_tokens=900, cache_write_tokens=70
        )
    )
    provider = make_provider(kind)

    if streamed:
        usage = _done(list(provider.stream(CONVERSATION))).usage
    else:
        usage = provider.complete(CONVERSATION).usage

    if kind == "google":  # Gemini counts no cache writes: they are prompt tokens like others
        assert usage == Usage(input_tokens=100, output_tokens=4, cache_read_tokens=900)
    else:
        assert usage == Usage(
            input_tokens=30, output_tokens=4, cache_read_tokens=900, cache_write_tokens=70
        )
    assert usage.total_input_tokens == 1000


@pytest.mark.parametrize("kind", KINDS)
def test_tool_round_trip_sends_the_assistant_turn_and_the_tool_result(
    kind: ProviderKind, fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(tool_call_reply("crm_get_contact", {"id": 42}), text_reply("Ada."))
    provider = make_provider(kind)
    first = provider.complete(CONVERSATION, [GET_CONTACT])
    call = first.tool_calls[0]

    second = provider.complete(
        [*CONVERSATION, first.to_message(), Message.tool_result(call.id, '{"name": "Ada"}')],
        [GET_CONTACT],
    )

    assert second.text == "Ada."
    request = fake_llm.requests[1]
    assert request.last_message_is_tool_result
    assert request.tool_results == ['{"name": "Ada"}']
    assert request.assistant_turns == 1
    assert request.tool_names == ["crm_get_contact"]


def test_openai_request_carries_system_message_tools_and_completion_limit(
    fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(text_reply("ok"))

    make_provider("openai").complete(CONVERSATION, [GET_CONTACT], temperature=0.2, max_tokens=300)

    body = fake_llm.requests[0].body
    assert body["messages"][0] == {"role": "system", "content": "You are the agency's assistant."}
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "crm_get_contact",
                "description": "Look up a contact by id",
                "parameters": GET_CONTACT.parameters,
            },
        }
    ]
    assert body["temperature"] == 0.2
    assert body["max_completion_tokens"] == 300
    assert fake_llm.requests[0].api_key == "test-key"


def test_openai_stream_asks_for_the_usage_chunk(
    fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(text_reply("ok"))

    list(make_provider("openai").stream(CONVERSATION))

    assert fake_llm.requests[0].body["stream_options"] == {"include_usage": True}


def test_anthropic_sends_the_system_prompt_as_system_not_as_a_message(
    fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(text_reply("ok"))
    messages = [Message.system("Be brief."), *CONVERSATION]

    make_provider("anthropic").complete(messages, [GET_CONTACT], max_tokens=300)

    request = fake_llm.requests[0]
    assert request.body["system"] == "Be brief.\n\nYou are the agency's assistant."
    assert [m["role"] for m in request.messages] == ["user"]
    assert request.body["max_tokens"] == 300
    assert request.body["tools"] == [
        {
            "name": "crm_get_contact",
            "description": "Look up a contact by id",
            "input_schema": GET_CONTACT.parameters,
        }
    ]
    assert request.api_key == "test-key"


def test_anthropic_puts_all_tool_results_of_a_turn_in_one_user_message(
    fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(
        Reply(
            tool_calls=(
                ScriptedToolCall("crm_get_contact", {"id": 1}),
                ScriptedToolCall("crm_get_contact", {"id": 2}),
            )
        ),
        text_reply("Both found."),
    )
    provider = make_provider("anthropic")
    first = provider.complete(CONVERSATION, [GET_CONTACT])
    one, two = first.tool_calls

    provider.complete(
        [
            *CONVERSATION,
            first.to_message(),
            Message.tool_result(one.id, "Ada"),
            Message.tool_result(two.id, "no such contact", is_error=True),
        ],
        [GET_CONTACT],
    )

    messages = fake_llm.requests[1].messages
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"] == [
        {"type": "tool_use", "id": one.id, "name": "crm_get_contact", "input": {"id": 1}},
        {"type": "tool_use", "id": two.id, "name": "crm_get_contact", "input": {"id": 2}},
    ]
    assert messages[2]["content"] == [
        {"type": "tool_result", "tool_use_id": one.id, "content": "Ada"},
        {
            "type": "tool_result",
            "tool_use_id": two.id,
            "content": "no such contact",
            "is_error": True,
        },
    ]
