"""The fake provider's /v1/embeddings as the real ``openai`` SDK sees it (strict validation)."""

from __future__ import annotations

import math

import openai
import pytest

from devkit.fake_server import SCRIPT_HEADER, FakeProviderServer, rate_limited, text_reply


def _client(server: FakeProviderServer, *, strict: bool = True) -> openai.OpenAI:
    return openai.OpenAI(
        api_key="k",
        base_url=server.openai_base_url,
        max_retries=0,
        _strict_response_validation=strict,
    )


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_vectors_have_the_requested_size_unit_length_and_are_deterministic(
    fake_embeddings: FakeProviderServer,
) -> None:
    client = _client(fake_embeddings)
    texts = ["the invoice was paid late", "the invoice was paid on time", "rainy weather"]

    first = client.embeddings.create(
        model="text-embedding-3-small", input=texts, dimensions=384, encoding_format="float"
    )
    again = client.embeddings.create(
        model="text-embedding-3-small", input=texts, dimensions=384, encoding_format="float"
    )

    vectors = [row.embedding for row in first.data]
    assert [row.index for row in first.data] == [0, 1, 2]
    assert all(len(v) == 384 for v in vectors)
    assert all(math.isclose(math.fsum(x * x for x in v), 1.0, rel_tol=1e-9) for v in vectors)
    assert [row.embedding for row in again.data] == vectors
    # Shared words bring texts together; nothing more is promised.
    assert _cosine(vectors[0], vectors[1]) > _cosine(vectors[0], vectors[2])
    assert first.usage.prompt_tokens > 0


def test_the_sdk_default_base64_encoding_decodes_to_the_same_vector(
    fake_embeddings: FakeProviderServer,
) -> None:
    # Not strict: the SDK validates the base64 string against its float list before decoding it,
    # as it would OpenAI's own answer.
    client = _client(fake_embeddings, strict=False)

    as_floats = client.embeddings.create(model="m", input="hello", encoding_format="float")
    as_default = client.embeddings.create(model="m", input="hello")  # the SDK asks for base64

    assert len(as_default.data[0].embedding) == 1536  # the model's own size
    assert as_default.data[0].embedding == pytest.approx(as_floats.data[0].embedding, abs=1e-7)
    assert fake_embeddings.requests[-1].body["encoding_format"] == "base64"


def test_a_sized_fake_model_gives_its_size() -> None:
    with FakeProviderServer() as server:
        reply = _client(server).embeddings.create(
            model="fake-embed-768", input=["a", "b"], encoding_format="float"
        )

    assert [len(row.embedding) for row in reply.data] == [768, 768]


def test_an_empty_input_is_refused_as_openai_does(fake_embeddings: FakeProviderServer) -> None:
    with pytest.raises(openai.BadRequestError, match="input"):
        _client(fake_embeddings).embeddings.create(model="m", input=[""])


def test_errors_come_from_a_script_named_by_model_or_header_and_chat_scripts_stay_untouched(
    fake_embeddings: FakeProviderServer,
) -> None:
    client = _client(fake_embeddings)
    fake_embeddings.enqueue(text_reply("for the chat"))  # the default script: chat only
    fake_embeddings.enqueue(rate_limited(), key="text-embedding-3-small")
    fake_embeddings.enqueue(rate_limited(), key="case-7")

    with pytest.raises(openai.RateLimitError):
        client.embeddings.create(model="text-embedding-3-small", input="x")
    with pytest.raises(openai.RateLimitError):
        client.embeddings.create(model="other", input="x", extra_headers={SCRIPT_HEADER: "case-7"})
    client.embeddings.create(
        model="text-embedding-3-small", input="x", encoding_format="float"
    )  # the queue is used up: vectors

    assert fake_embeddings.script(None).remaining == 1
    chat = client.chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": "hi"}]
    )
    assert chat.choices[0].message.content == "for the chat"
