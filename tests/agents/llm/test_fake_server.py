"""The fake provider itself: wire formats the SDKs accept strictly, scripts, responders,
recording."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import anthropic
import openai
import pytest
from anthropic.types import MessageParam

from devkit.fake_server import (
    SCRIPT_HEADER,
    FakeProviderServer,
    Reply,
    ScriptedToolCall,
    by_turn,
    react_responder,
    text_reply,
    tool_call_reply,
)

ADD_NOTE = {"contact_id": 42, "body": "Wants a quote for the spring campaign by Friday."}


def _openai(server: FakeProviderServer, **options: object) -> openai.OpenAI:
    # Strict validation: the SDK checks every response against its own models.
    return openai.OpenAI(
        api_key="k",
        base_url=server.openai_base_url,
        max_retries=0,
        _strict_response_validation=True,
        **options,  # type: ignore[arg-type]
    )


def _anthropic(server: FakeProviderServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        api_key="k",
        base_url=server.anthropic_base_url,
        max_retries=0,
        _strict_response_validation=True,
    )


def test_openai_sdk_streaming_helper_assembles_the_fake_stream(
    fake_llm: FakeProviderServer,
) -> None:
    fake_llm.enqueue(tool_call_reply("crm_add_note", ADD_NOTE, text="Adding a note."))

    with _openai(fake_llm).chat.completions.stream(
        model="gpt-test",
        messages=[{"role": "user", "content": "note it"}],
        stream_options={"include_usage": True},
    ) as stream:
        final = stream.get_final_completion()

    message = final.choices[0].message
    assert message.content == "Adding a note."
    assert message.tool_calls is not None
    (call,) = message.tool_calls
    assert call.type == "function"
    assert call.function.name == "crm_add_note"
    assert json.loads(call.function.arguments) == ADD_NOTE
    assert final.choices[0].finish_reason == "tool_calls"
    assert final.usage is not None
    assert final.usage.completion_tokens == 5


def test_anthropic_sdk_streaming_helper_assembles_the_fake_stream(
    fake_llm: FakeProviderServer,
) -> None:
    fake_llm.enqueue(tool_call_reply("crm_add_note", ADD_NOTE, text="Adding a note."))

    with _anthropic(fake_llm).messages.stream(
        model="claude-test", max_tokens=100, messages=[{"role": "user", "content": "note it"}]
    ) as stream:
        final = stream.get_final_message()

    text, tool_use = final.content
    assert text.type == "text"
    assert text.text == "Adding a note."
    assert tool_use.type == "tool_use"
    assert tool_use.name == "crm_add_note"
    assert tool_use.input == ADD_NOTE
    assert final.stop_reason == "tool_use"
    assert final.usage.output_tokens == 5


def test_plain_replies_pass_the_sdks_strict_validation(fake_llm: FakeProviderServer) -> None:
    reply = Reply(
        text="Both.",
        tool_calls=(ScriptedToolCall("a", {"x": 1}), ScriptedToolCall("b", {})),
        cache_read_tokens=5,
    )
    fake_llm.enqueue(reply, reply)

    chat = _openai(fake_llm).chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "go"}]
    )
    message = _anthropic(fake_llm).messages.create(
        model="claude-test", max_tokens=10, messages=[{"role": "user", "content": "go"}]
    )

    assert [
        c.function.name for c in chat.choices[0].message.tool_calls or [] if c.type == "function"
    ] == ["a", "b"]
    assert [b.type for b in message.content] == ["text", "tool_use", "tool_use"]
    assert message.usage.cache_read_input_tokens == 5


def test_scripts_are_chosen_by_header_then_by_model_then_default(
    fake_llm: FakeProviderServer,
) -> None:
    fake_llm.enqueue(text_reply("from the header script"), key="conversation-7")
    fake_llm.enqueue(text_reply("from the model script"), key="model-b")
    fake_llm.enqueue(text_reply("from the default script"))
    client = _openai(fake_llm)

    def ask(model: str, headers: dict[str, str] | None = None) -> str | None:
        response = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "hi"}], extra_headers=headers
        )
        return response.choices[0].message.content

    assert ask("model-a", {SCRIPT_HEADER: "conversation-7"}) == "from the header script"
    assert ask("model-b") == "from the model script"
    assert ask("model-a") == "from the default script"
    assert [r.script_key for r in fake_llm.requests] == ["conversation-7", "model-b", None]
    assert fake_llm.requests_for("model-b")[0].model == "model-b"


def test_an_exhausted_script_answers_400_naming_the_script(fake_llm: FakeProviderServer) -> None:
    with pytest.raises(openai.BadRequestError, match="script 'default' has no reply left"):
        _openai(fake_llm).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )


def test_react_responder_calls_the_tool_then_answers_from_its_result(
    fake_llm: FakeProviderServer,
) -> None:
    fake_llm.set_responder(react_responder("crm_get_contact", {"id": 42}, "It is Ada."))
    client = _anthropic(fake_llm)
    question: MessageParam = {"role": "user", "content": "who is 42?"}

    first = client.messages.create(model="c", max_tokens=10, messages=[question])
    tool_use = first.content[0]
    assert tool_use.type == "tool_use"
    second = client.messages.create(
        model="c",
        max_tokens=10,
        messages=[
            question,
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": tool_use.id, "name": tool_use.name, "input": {}}
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": tool_use.id, "content": "Ada"}],
            },
        ],
    )

    assert tool_use.name == "crm_get_contact"
    assert second.content[0].type == "text"
    assert second.content[0].text == "It is Ada."


def test_concurrent_conversations_each_follow_their_own_turn(
    fake_llm: FakeProviderServer,
) -> None:
    fake_llm.latency = 0.05
    fake_llm.set_responder(
        by_turn(tool_call_reply("lookup", {"n": 1}), then=text_reply("final answer"))
    )
    client = _openai(fake_llm)

    def converse(n: int) -> str | None:
        messages: list[dict[str, object]] = [{"role": "user", "content": f"conversation {n}"}]
        if n % 2:  # odd conversations are one turn further along
            messages += [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": f"c{n}",
                            "type": "function",
                            "function": {"name": "lookup", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": f"c{n}", "content": "found"},
            ]
        response = client.chat.completions.create(model="m", messages=messages)  # type: ignore[arg-type]
        message = response.choices[0].message
        return (
            message.content
            if message.content
            else message.tool_calls[0].type
            if message.tool_calls
            else None
        )

    with ThreadPoolExecutor(max_workers=50) as pool:
        answers = list(pool.map(converse, range(100)))

    assert answers == ["function" if n % 2 == 0 else "final answer" for n in range(100)]
    assert fake_llm.request_count == 100


def test_reply_latency_is_applied_before_answering(fake_llm: FakeProviderServer) -> None:
    fake_llm.enqueue(Reply(text="slow", latency=5.0))

    with pytest.raises(openai.APITimeoutError):
        _openai(fake_llm, timeout=0.2).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )


def test_unknown_route_is_a_404(fake_llm: FakeProviderServer) -> None:
    with pytest.raises(openai.NotFoundError):
        _openai(fake_llm).moderations.create(model="m", input="hi")

    assert fake_llm.request_count == 0


@pytest.mark.slow
def test_command_line_server_answers_openai_clients() -> None:
    with FakeProviderServer() as probe:  # borrow a free port, then release it
        port = probe.port
    process = subprocess.Popen(
        [sys.executable, "-m", "devkit.fake_server", "--port", str(port)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert "listening" in process.stdout.readline()
        client = openai.OpenAI(api_key="k", base_url=f"http://127.0.0.1:{port}/v1", max_retries=2)
        response = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "ping"}]
        )
    finally:
        process.terminate()
        process.wait(timeout=10)

    assert response.choices[0].message.content == "(fake model) You said: ping"
