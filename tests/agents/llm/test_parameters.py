"""Request parameters a model does not take: OpenAI's reasoning models and the temperature."""

from __future__ import annotations

from typing import Any

import pytest

from agents.llm.base import Provider
from agents.llm.types import Completion, LLMBadRequest, Message, StreamDone
from devkit.fake_server import FakeProviderServer, RawReply, text_reply
from devkit.fake_server.script import RecordedRequest, Step
from tests.agents.llm.helpers import MakeProvider

HELLO = [Message.user("hello")]


def refusal(param: str, code: str) -> dict[str, Any]:
    """OpenAI's answer to a parameter the model does not take (as gpt-5 answers a temperature)."""
    return {
        "error": {
            "message": f"Unsupported value: '{param}' does not support 0.7 with this model. "
            "Only the default (1) value is supported.",
            "type": "invalid_request_error",
            "param": param,
            "code": code,
        }
    }


def reasoning_model(request: RecordedRequest) -> Step:
    if "temperature" in request.body:
        return RawReply(refusal("temperature", "unsupported_value"), status=400)
    return text_reply("answered")


def ask(provider: Provider, *, stream: bool) -> Completion:
    if not stream:
        return provider.complete(HELLO, temperature=0.7)
    events = list(provider.stream(HELLO, temperature=0.7))
    assert isinstance(events[-1], StreamDone)
    return events[-1].completion


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
def test_a_model_that_refuses_the_temperature_is_asked_again_without_it_and_from_then_on(
    fake_llm: FakeProviderServer, make_provider: MakeProvider, stream: bool
) -> None:
    fake_llm.set_responder(reasoning_model)
    provider = make_provider("openai", model="gpt-5-mini")

    first = ask(provider, stream=stream)
    second = ask(provider, stream=stream)

    assert (first.text, first.attempts) == ("answered", 1)  # not a retry with backoff
    assert second.text == "answered"
    sent = [request.body.get("temperature") for request in fake_llm.requests]
    assert sent == [0.7, None, None]  # refused once, then left out for this model


def test_the_temperature_is_still_sent_to_other_models_of_the_same_provider(
    fake_llm: FakeProviderServer, make_provider: MakeProvider
) -> None:
    fake_llm.set_responder(reasoning_model, key="gpt-5-mini")
    fake_llm.enqueue(text_reply("warm"), key="gpt-4o")
    provider = make_provider("openai", model="gpt-5-mini")

    provider.complete(HELLO, temperature=0.7)
    provider.complete(HELLO, model="gpt-4o", temperature=0.7)

    sent = [(r.model, r.body.get("temperature")) for r in fake_llm.requests]
    assert sent == [("gpt-5-mini", 0.7), ("gpt-5-mini", None), ("gpt-4o", 0.7)]


@pytest.mark.parametrize(
    ("param", "code"),
    [("max_completion_tokens", "unsupported_parameter"), ("temperature", "invalid_value")],
    ids=["another parameter", "a value out of range"],
)
def test_other_bad_requests_fail_at_once_with_the_providers_message(
    fake_llm: FakeProviderServer, make_provider: MakeProvider, param: str, code: str
) -> None:
    fake_llm.enqueue(RawReply(refusal(param, code), status=400))
    provider = make_provider("openai")

    with pytest.raises(LLMBadRequest, match=f"Unsupported value: '{param}'"):
        provider.complete(HELLO, temperature=0.7)

    assert fake_llm.request_count == 1
