"""What is Gemini's own: its wire (contents, functionCall / functionResponse parts, the system
instruction, JSON Schema parameters), its usage counts, its finish reasons and its errors, through
the real ``google-genai`` client against the fake server. What all providers share is tested over
every wire format in the other files of this directory."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from google import genai
from google.genai import errors, types

from agents.llm.google_provider.wire import REPLAYED_SIGNATURE
from agents.llm.types import (
    LLMBadRequest,
    LLMConfigurationError,
    LLMRateLimited,
    LLMUnavailable,
    Message,
    StreamDone,
    ToolCall,
    ToolDefinition,
    Usage,
)
from devkit.fake_server import (
    FakeProviderServer,
    HttpError,
    RawReply,
    Reply,
    ScriptedToolCall,
    text_reply,
    tool_call_reply,
)
from tests.agents.llm.helpers import MakeProvider

NOTE = ToolDefinition(
    name="crm_add_note",
    description="Add a note to a contact",
    parameters={
        "type": "object",
        "properties": {"contact_id": {"type": "string"}, "content": {"type": "string"}},
        "required": ["contact_id", "content"],
        "additionalProperties": False,  # not in the API's OpenAPI subset: sent as JSON Schema
    },
)
A = ToolCall.from_raw(id="call_a", name="crm_add_note", raw_arguments='{"contact_id": "1"}')
B = ToolCall.from_raw(id="call_b", name="crm_get_contact", raw_arguments='{"id": 2}')
CONVERSATION = [
    Message.system("You help the agency."),
    Message.system("Be brief."),
    Message.user("Note that 1 called, and look up 2."),
    Message.assistant("On it.", (A, B)),
    Message.tool_result("call_b", '{"name": "Bob"}'),
    Message.tool_result("call_a", "contact not found", is_error=True),
    Message.user("And now?"),
]


def _gemini(parts: list[dict[str, Any]], finish: str | None = "STOP", **usage: int) -> RawReply:
    body: dict[str, Any] = {"candidates": [{"content": {"role": "model", "parts": parts}}]}
    if finish is not None:
        body["candidates"][0]["finishReason"] = finish
    body["usageMetadata"] = {"promptTokenCount": 10, "candidatesTokenCount": 2, **usage}
    return RawReply(body)


def test_the_request_is_the_gemini_apis_generate_content(
    fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(text_reply("Done."))

    make_provider("google", api_key="gemini-key").complete(
        CONVERSATION, [NOTE], temperature=0.3, max_tokens=300
    )

    (request,) = fake_llm.requests
    assert request.path == "/v1beta/models/fake-model:generateContent"
    assert request.headers["x-goog-api-key"] == "gemini-key"
    assert "authorization" not in request.headers
    body = request.body
    assert body["systemInstruction"] == {"parts": [{"text": "You help the agency.\n\nBe brief."}]}
    assert [content["role"] for content in body["contents"]] == ["user", "model", "user"]
    model_turn = body["contents"][1]["parts"]
    assert model_turn[0] == {"text": "On it."}
    first, second = model_turn[1], model_turn[2]
    assert first["functionCall"] == {"id": "call_a", "name": "crm_add_note", "args": A.arguments}
    # Only the first call of a turn carries a signature, as the model sends them (Gemini 3).
    assert base64.b64decode(first["thoughtSignature"]) == REPLAYED_SIGNATURE
    assert "thoughtSignature" not in second
    results = body["contents"][2]["parts"]
    assert results[0]["functionResponse"] == {
        "id": "call_b",
        "name": "crm_get_contact",
        "response": {"output": '{"name": "Bob"}'},
    }
    assert results[1]["functionResponse"]["response"] == {"error": "contact not found"}
    assert results[2] == {"text": "And now?"}
    (declaration,) = body["tools"][0]["functionDeclarations"]
    assert declaration["name"] == "crm_add_note"
    schema = declaration.get("parametersJsonSchema") or declaration.get("parameters_json_schema")
    assert schema == NOTE.parameters
    assert "parameters" not in declaration
    assert body["generationConfig"] == {"temperature": 0.3, "maxOutputTokens": 300}


def test_a_stream_asks_for_server_sent_events(
    fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(text_reply("Streamed to the end."))

    events = list(make_provider("google").stream([Message.user("Hi")]))

    assert isinstance(events[-1], StreamDone)
    assert events[-1].completion.text == "Streamed to the end."
    (request,) = fake_llm.requests
    assert request.path == "/v1beta/models/fake-model:streamGenerateContent"
    assert request.stream


def test_the_environment_does_not_switch_the_client_to_vertex_or_another_api_version(
    fake_llm: FakeProviderServer, make_provider: MakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOOGLE_GENAI_USE_VERTEXAI", "true")
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "platform-project")
    monkeypatch.setenv("GOOGLE_GENAI_API_VERSION", "v1alpha")
    monkeypatch.setenv("GOOGLE_API_KEY", "the-platform-key")
    fake_llm.enqueue(text_reply("ok"))

    make_provider("google", api_key="agency-key").complete([Message.user("Hi")])

    (request,) = fake_llm.requests
    assert request.path == "/v1beta/models/fake-model:generateContent"
    assert request.api_key == "agency-key"


@pytest.mark.parametrize("streamed", [False, True])
def test_calls_without_an_id_get_distinct_ids_and_their_results_pair_by_id(
    streamed: bool, fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    """Gemini 2.x sends no id with a call: the gateway makes them, and sends them back."""
    fake_llm.enqueue(
        Reply(
            tool_calls=(
                ScriptedToolCall("crm_add_note", {"n": 1}),
                ScriptedToolCall("crm_add_note", {"n": 2}),
            )
        ),
        text_reply("Both noted."),
    )
    provider = make_provider("google")
    messages = [Message.user("Two notes.")]

    if streamed:
        done = list(provider.stream(messages, [NOTE]))[-1]
        assert isinstance(done, StreamDone)
        first = done.completion
    else:
        first = provider.complete(messages, [NOTE])
    ids = [call.id for call in first.tool_calls]
    results = [Message.tool_result(call_id, "ok") for call_id in ids]
    second = provider.complete([*messages, first.to_message(), *results], [NOTE])

    assert len(set(ids)) == 2
    assert all(call_id.startswith("call_") for call_id in ids)
    assert [call.arguments for call in first.tool_calls] == [{"n": 1}, {"n": 2}]
    assert first.stop_reason == "tool_calls"
    assert first.raw_stop_reason == "STOP"
    assert second.text == "Both noted."
    sent = fake_llm.requests[1].body["contents"]
    assert [p["functionResponse"]["id"] for p in sent[2]["parts"]] == ids


def test_a_call_with_an_id_keeps_it(
    fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(Reply(tool_calls=(ScriptedToolCall("crm_add_note", {}, id="fc-7"),)))

    completion = make_provider("google").complete([Message.user("Note.")], [NOTE])

    assert [call.id for call in completion.tool_calls] == ["fc-7"]


def test_thinking_is_billed_as_output_and_cached_prompt_tokens_are_cache_reads(
    fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    reply = _gemini(
        [{"text": "Let me think.", "thought": True}, {"text": "Ada."}],
        promptTokenCount=1000,
        cachedContentTokenCount=600,
        candidatesTokenCount=20,
        thoughtsTokenCount=300,
        toolUsePromptTokenCount=5,
    )
    fake_llm.enqueue(reply)

    completion = make_provider("google").complete([Message.user("Who?")])

    # The thought summary is not the answer.
    assert completion.text == "Ada."
    assert completion.usage == Usage(input_tokens=405, output_tokens=320, cache_read_tokens=600)


def test_the_streamed_usage_is_the_last_chunks_running_total(
    fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(
        text_reply("One two three four five six seven.", input_tokens=40, output_tokens=9)
    )

    events = list(make_provider("google").stream([Message.user("Count.")]))

    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.completion.usage == Usage(input_tokens=40, output_tokens=9)
    assert done.completion.raw["usageMetadata"]["candidatesTokenCount"] == 9


def test_a_function_call_the_model_could_not_form_is_retried_then_unavailable(
    fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    malformed = _gemini([], finish="MALFORMED_FUNCTION_CALL")
    fake_llm.enqueue(malformed, text_reply("Second time lucky."), malformed, malformed)
    provider = make_provider("google", max_retries=1)

    assert provider.complete([Message.user("Note it.")], [NOTE]).attempts == 2
    with pytest.raises(LLMUnavailable) as caught:
        provider.complete([Message.user("Note it.")], [NOTE])

    assert "MALFORMED_FUNCTION_CALL" in str(caught.value)
    assert caught.value.attempts == 2


@pytest.mark.parametrize("finish", ["SAFETY", "RECITATION", "PROHIBITED_CONTENT"])
def test_a_reply_stopped_by_a_safety_filter_is_a_refusal(
    finish: str, fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(_gemini([], finish=finish))

    completion = make_provider("google").complete([Message.user("Something.")])

    assert (completion.stop_reason, completion.raw_stop_reason) == ("refusal", finish)
    assert completion.text == ""


def test_a_blocked_prompt_is_a_refusal_not_a_malformed_reply(
    fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(
        RawReply(
            {
                "promptFeedback": {"blockReason": "SAFETY"},
                "usageMetadata": {"promptTokenCount": 7, "totalTokenCount": 7},
            }
        )
    )

    completion = make_provider("google").complete([Message.user("Something.")])

    assert (completion.stop_reason, completion.raw_stop_reason) == ("refusal", "SAFETY")
    assert completion.usage == Usage(input_tokens=7)
    assert completion.attempts == 1


def test_a_reply_without_candidates_is_malformed_and_retried(
    fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(RawReply({"usageMetadata": {"promptTokenCount": 7}}), text_reply("whole"))

    completion = make_provider("google").complete([Message.user("Hi")])

    assert (completion.text, completion.attempts) == ("whole", 2)


def test_a_429_waits_the_retry_delay_google_names_in_its_error_details(
    fake_llm: FakeProviderServer, make_provider: MakeProvider, sleeps: list[float]
) -> None:
    """The Gemini API says when to come back in a RetryInfo detail, not a Retry-After header."""
    exhausted = {
        "error": {
            "code": 429,
            "message": "Resource has been exhausted (e.g. check quota).",
            "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}],
        }
    }
    fake_llm.enqueue(RawReply(exhausted, status=429), text_reply("ok"))

    completion = make_provider("google", sleep=sleeps.append).complete([Message.user("Hi")])

    assert completion.attempts == 2
    assert sleeps == [7.0]


def test_a_429_that_outlasts_the_retries_is_rate_limited_with_the_servers_hint(
    fake_llm: FakeProviderServer, make_provider: MakeProvider, sleeps: list[float]
) -> None:
    exhausted = {
        "error": {"code": 429, "message": "Quota exceeded.", "status": "RESOURCE_EXHAUSTED"}
    }
    fake_llm.enqueue(*[RawReply(exhausted, status=429)] * 2)

    with pytest.raises(LLMRateLimited) as caught:
        make_provider("google", max_retries=1, sleep=sleeps.append).complete([Message.user("Hi")])

    assert caught.value.status_code == 429
    assert "Quota exceeded." in str(caught.value)
    assert caught.value.attempts == 2


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (400, LLMBadRequest),
        (401, LLMConfigurationError),
        (403, LLMConfigurationError),
        (404, LLMBadRequest),
    ],
)
def test_client_errors_are_not_retried(
    status: int,
    error: type[Exception],
    fake_llm: FakeProviderServer,
    make_provider: MakeProvider,
) -> None:
    body = {"error": {"code": status, "message": "API key not valid.", "status": "X"}}
    fake_llm.enqueue(RawReply(body, status=status), text_reply("never"))

    with pytest.raises(error) as caught:
        make_provider("google").complete([Message.user("Hi")])

    assert "API key not valid." in str(caught.value)
    assert fake_llm.request_count == 1


def test_an_error_inside_the_stream_before_any_text_is_retried(
    fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(
        Reply(text="lost", stream_events=0, stream_error=HttpError(503)),
        text_reply("The retry's answer."),
    )

    events = list(make_provider("google").stream([Message.user("Hi")]))

    done = events[-1]
    assert isinstance(done, StreamDone)
    assert (done.completion.text, done.completion.attempts) == ("The retry's answer.", 2)


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        (
            [
                Message.user("Go."),
                Message.assistant("", (A, B)),
                Message.tool_result("call_a", "x"),
            ],
            "number of function response parts",
        ),
        (
            [Message.user("Go."), Message.assistant("", (A,)), Message.assistant("Done.")],
            "must be followed at once",
        ),
        (
            [Message.user("Go."), Message.assistant("", (A,)), Message.user("Hm?")],
            "number of function response parts",
        ),
    ],
    ids=["a result missing", "no result turn", "a user turn instead of the results"],
)
def test_the_fake_refuses_calls_and_results_that_do_not_pair_up_as_gemini_does(
    messages: list[Message],
    problem: str,
    fake_llm: FakeProviderServer,
    make_provider: MakeProvider,
) -> None:
    fake_llm.enqueue(text_reply("answered"))

    with pytest.raises(LLMBadRequest) as caught:
        make_provider("google").complete(messages)

    assert problem in str(caught.value)
    assert fake_llm.script().remaining == 1


def test_a_tool_call_reply_from_the_script_round_trips(
    fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.enqueue(
        tool_call_reply("crm_add_note", {"contact_id": "1", "content": "hi"}, text="Noting.")
    )

    completion = make_provider("google").complete([Message.user("Note.")], [NOTE])

    assert completion.text == "Noting."
    assert [(c.name, c.arguments) for c in completion.tool_calls] == [
        ("crm_add_note", {"contact_id": "1", "content": "hi"})
    ]
    assert completion.provider == "google"
    assert completion.model == "fake-model"


def test_the_fake_answers_the_sdk_itself_in_googles_shapes(fake_llm: FakeProviderServer) -> None:
    """The plain SDK, outside the gateway: a reply, a stream and a refusal as the Gemini API
    sends them."""
    client = genai.Client(
        api_key="k", http_options=types.HttpOptions(base_url=fake_llm.google_base_url)
    )
    fake_llm.enqueue(text_reply("Plain."), text_reply("Streamed in pieces, three words each."))

    reply = client.models.generate_content(model="gemini-2.5-flash", contents="Hi")
    chunks = list(client.models.generate_content_stream(model="gemini-2.5-flash", contents="Hi"))
    with pytest.raises(errors.ClientError) as refused:
        client.models.generate_content(
            model="gemini-2.5-flash",
            contents=[
                types.Content(
                    role="model",
                    parts=[types.Part(function_call=types.FunctionCall(name="t", args={}))],
                ),
                types.Content(role="user", parts=[types.Part(text="no response")]),
            ],
        )

    assert reply.text == "Plain."
    assert reply.usage_metadata is not None
    assert reply.usage_metadata.prompt_token_count == 10
    assert "".join(chunk.text or "" for chunk in chunks) == "Streamed in pieces, three words each."
    assert len(chunks) > 2
    assert chunks[-1].candidates is not None
    assert chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP
    assert (refused.value.code, refused.value.status) == (400, "INVALID_ARGUMENT")
    assert "function response" in str(refused.value.message)


def test_an_invalid_api_key_is_a_configuration_error_not_a_bad_request(
    fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    """Gemini answers a wrong key with HTTP 400 and the reason API_KEY_INVALID in its details
    (where OpenAI and Anthropic answer 401)."""
    body = {
        "error": {
            "code": 400,
            "message": "API key not valid. Please pass a valid API key.",
            "status": "INVALID_ARGUMENT",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "API_KEY_INVALID",
                    "domain": "googleapis.com",
                }
            ],
        }
    }
    fake_llm.enqueue(RawReply(body, status=400), text_reply("never"))

    with pytest.raises(LLMConfigurationError) as caught:
        make_provider("google", api_key="wrong-key").complete([Message.user("Hi")])

    assert "API key not valid" in str(caught.value)
    assert caught.value.status_code == 400
    assert fake_llm.request_count == 1


def test_an_unexpected_tool_call_without_calls_is_retried_like_a_malformed_one(
    fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    unexpected = _gemini([], finish="UNEXPECTED_TOOL_CALL")
    fake_llm.enqueue(unexpected, text_reply("Second time lucky."), unexpected, unexpected)
    provider = make_provider("google", max_retries=1)

    assert provider.complete([Message.user("Note it.")], [NOTE]).text == "Second time lucky."
    with pytest.raises(LLMUnavailable) as caught:
        provider.complete([Message.user("Note it.")], [NOTE])

    assert "UNEXPECTED_TOOL_CALL" in str(caught.value)


def test_a_result_whose_call_was_trimmed_from_the_window_goes_as_text(
    fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    """A functionResponse needs its function's name and a call in the turn before: a result
    whose call is no longer in the conversation cannot be one."""
    fake_llm.enqueue(text_reply("Noted."))

    completion = make_provider("google").complete(
        [
            Message.user("Earlier, summarised."),
            Message.tool_result("call_gone", '{"id": 7}'),
            Message.user("And now?"),
        ],
        [NOTE],
    )

    assert completion.text == "Noted."
    (sent,) = fake_llm.requests[0].body["contents"]
    assert not any("functionResponse" in part for part in sent["parts"])
    assert any("call_gone" in part.get("text", "") for part in sent["parts"])


def test_close_closes_the_async_client_it_made(make_provider: MakeProvider) -> None:
    provider = make_provider("google")
    async_client = provider._async_http  # type: ignore[attr-defined]

    provider.close()

    assert async_client.is_closed
