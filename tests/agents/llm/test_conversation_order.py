"""The fake provider refuses what the real APIs refuse about the order of tool calls and their
results, so a runtime that loses, repeats or misplaces a result fails in tests as in production.
Each refused conversation would otherwise get the scripted reply queued for it."""

from __future__ import annotations

import anthropic
import openai
import pytest

from agents.llm.types import LLMBadRequest, Message, ProviderKind, ToolCall
from devkit.fake_server import FakeProviderServer, text_reply
from tests.agents.llm.helpers import MakeProvider

QUESTION = Message.user("Look up 1 and 2.")
A = ToolCall.from_raw(id="call_a", name="crm_get_contact", raw_arguments='{"id": 1}')
B = ToolCall.from_raw(id="call_b", name="crm_get_contact", raw_arguments='{"id": 2}')
CALLS = Message.assistant("Looking both up.", (A, B))


def _refused(
    kind: ProviderKind,
    messages: list[Message],
    fake_llm: FakeProviderServer,
    make_provider: MakeProvider,
) -> str:
    fake_llm.enqueue(text_reply("answered"))
    with pytest.raises(LLMBadRequest) as caught:
        make_provider(kind).complete(messages)
    assert caught.value.status_code == 400
    assert fake_llm.script().remaining == 1  # a refused request takes no step of the script
    return str(caught.value)


@pytest.mark.parametrize("kind", ["openai", "anthropic", "google"])
def test_a_conversation_in_order_is_answered(
    kind: ProviderKind, fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(text_reply("answered"))
    messages = [
        QUESTION,
        CALLS,
        Message.tool_result("call_b", "Bob"),  # results of one turn may come in any order
        Message.tool_result("call_a", "Ada", is_error=True),
        Message.user("And now?"),
    ]

    assert make_provider(kind).complete(messages).text == "answered"


def test_openai_refuses_a_message_between_a_call_and_its_result(
    fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    messages = [
        QUESTION,
        CALLS,
        Message.tool_result("call_a", "Ada"),
        Message.user("Still there?"),
        Message.tool_result("call_b", "Bob"),
    ]

    error = _refused("openai", messages, fake_llm, make_provider)

    assert "did not have response messages: call_b" in error
    assert "messages.[3] is not a 'tool' message" in error


def test_openai_refuses_a_call_left_without_its_result(
    fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    error = _refused(
        "openai", [QUESTION, CALLS, Message.tool_result("call_b", "Bob")], fake_llm, make_provider
    )

    assert "did not have response messages: call_a" in error
    assert "the conversation ends" in error


def test_openai_refuses_a_result_no_call_asked_for(
    fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    error = _refused(
        "openai", [QUESTION, Message.tool_result("call_z", "?")], fake_llm, make_provider
    )

    assert "must be a response to a preceding message with 'tool_calls'" in error


def test_openai_refuses_a_call_answered_twice(
    fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    messages = [
        QUESTION,
        CALLS,
        Message.tool_result("call_a", "Ada"),
        Message.tool_result("call_a", "Ada again"),
        Message.tool_result("call_b", "Bob"),
    ]

    error = _refused("openai", messages, fake_llm, make_provider)

    assert "answers tool_call_id 'call_a' a second time" in error


def test_anthropic_refuses_a_user_turn_missing_a_tool_result(
    fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    # Our client merges the result and the next user message into one user turn.
    messages = [QUESTION, CALLS, Message.tool_result("call_a", "Ada"), Message.user("Next?")]

    error = _refused("anthropic", messages, fake_llm, make_provider)

    assert "messages.1: `tool_use` ids were found without `tool_result` blocks" in error
    assert "call_b" in error


def test_anthropic_refuses_tool_results_after_other_content(
    fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    messages = [
        QUESTION,
        CALLS,
        Message.user("By the way..."),
        Message.tool_result("call_a", "Ada"),
        Message.tool_result("call_b", "Bob"),
    ]

    error = _refused("anthropic", messages, fake_llm, make_provider)

    assert "messages.2.content.1: `tool_result` blocks must come first" in error


def test_anthropic_refuses_a_result_for_a_call_of_another_turn(
    fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    messages = [
        QUESTION,
        CALLS,
        Message.tool_result("call_a", "Ada"),
        Message.tool_result("call_b", "Bob"),
        Message.assistant("Anything else?"),
        Message.tool_result("call_a", "Ada, replayed"),
    ]

    error = _refused("anthropic", messages, fake_llm, make_provider)

    assert "messages.4.content.0: unexpected `tool_use_id` found in `tool_result` blocks" in error


def test_refusals_use_each_wire_formats_error_body(fake_llm: FakeProviderServer) -> None:
    openai_client = openai.OpenAI(api_key="k", base_url=fake_llm.openai_base_url, max_retries=0)
    anthropic_client = anthropic.Anthropic(
        api_key="k", base_url=fake_llm.anthropic_base_url, max_retries=0
    )

    with pytest.raises(openai.BadRequestError) as openai_error:
        openai_client.chat.completions.create(
            model="m",
            messages=[
                {"role": "user", "content": "hi"},
                {"role": "tool", "tool_call_id": "call_z", "content": "?"},
            ],
        )
    with pytest.raises(anthropic.BadRequestError) as anthropic_error:
        anthropic_client.messages.create(
            model="m",
            max_tokens=10,
            messages=[
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "toolu_1", "name": "t", "input": {}}],
                },
                {"role": "user", "content": "no result"},
            ],
        )

    assert openai_error.value.type == "invalid_request_error"
    assert "role 'tool' must be a response" in openai_error.value.message
    body = anthropic_error.value.body
    assert isinstance(body, dict)
    assert body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert "toolu_1" in body["error"]["message"]
