"""OpenAI embeddings and OpenAI-compatible servers through the real ``openai`` SDK, against the
fake provider server; the agency's choice, with the key and base URL of its LLM provider row."""

from __future__ import annotations

import math

import pytest
from django.test import override_settings

from agents.models import ProviderName
from core import tenancy
from core.models import Agency, EmbeddingProvider
from devkit.fake_server import FakeProviderServer, HttpError, rate_limited, server_error
from memory import embeddings
from tests.agents.factories import LLMProviderFactory
from tests.factories import AgencyFactory

pytestmark = pytest.mark.django_db


def _agency(
    server: FakeProviderServer,
    kind: str,
    model: str = "",
    *,
    api_key: str | None = "sk-agency-key-1234",
    base_url: bool = True,
) -> Agency:
    agency = AgencyFactory.create(embedding_provider=kind, embedding_model=model)
    LLMProviderFactory.create(
        agency=agency,
        provider_name=kind,
        api_key=api_key,
        api_endpoint=server.openai_base_url if base_url else "",
    )
    return agency


def _embedding_requests(server: FakeProviderServer) -> list[dict[str, object]]:
    return [dict(r.body) for r in server.requests if r.path == "/v1/embeddings"]


def test_openai_embeds_at_the_platform_dimension_with_the_agencys_key(
    fake_embeddings: FakeProviderServer,
) -> None:
    agency = _agency(fake_embeddings, EmbeddingProvider.OPENAI)

    embedded = embeddings.embed(
        ["The customer prefers e-mail.", "Renewal in March"], agency_id=agency.id
    )

    assert embedded.model == "openai:text-embedding-3-small@384" == embeddings.model_for(agency.id)
    assert [len(v) for v in embedded.vectors] == [384, 384]
    for vector in embedded.vectors:
        assert math.isclose(math.fsum(v * v for v in vector), 1.0, rel_tol=1e-9)
    (request,) = [r for r in fake_embeddings.requests if r.path == "/v1/embeddings"]
    assert request.body["model"] == "text-embedding-3-small"
    assert request.body["dimensions"] == 384
    assert request.body["input"] == ["The customer prefers e-mail.", "Renewal in March"]
    assert request.api_key == "sk-agency-key-1234"


def test_a_local_server_model_is_used_through_its_base_url_without_a_dimension(
    fake_embeddings: FakeProviderServer,
) -> None:
    agency = _agency(
        fake_embeddings, EmbeddingProvider.OPENAI_COMPATIBLE, "fake-embed-384", api_key=None
    )

    first = embeddings.embed(["invoice paid late"], agency_id=agency.id)
    again = embeddings.embed(["invoice paid late"], agency_id=agency.id)

    assert first.model == "openai_compatible:fake-embed-384@384"
    assert first.vectors == again.vectors  # deterministic
    (request, _) = _embedding_requests(fake_embeddings)
    assert "dimensions" not in request
    assert request["model"] == "fake-embed-384"


def test_a_server_model_of_another_size_is_refused_with_the_reason(
    fake_embeddings: FakeProviderServer,
) -> None:
    agency = _agency(fake_embeddings, EmbeddingProvider.OPENAI_COMPATIBLE, "fake-embed-768")

    with pytest.raises(embeddings.EmbeddingError, match="768 dimensions") as caught:
        embeddings.embed(["anything"], agency_id=agency.id)

    assert caught.value.code == "embedding_not_configured"
    assert not caught.value.retryable


def test_an_openai_compatible_choice_without_a_model_is_a_configuration_error(
    fake_embeddings: FakeProviderServer,
) -> None:
    agency = _agency(fake_embeddings, EmbeddingProvider.OPENAI_COMPATIBLE)

    with pytest.raises(embeddings.EmbeddingError, match="model name") as caught:
        embeddings.embed(["anything"], agency_id=agency.id)

    assert caught.value.code == "embedding_not_configured"
    assert _embedding_requests(fake_embeddings) == []


@override_settings(AGENTDESK_EMBEDDING_BATCH_SIZE=2)
def test_texts_go_in_bounded_batches_and_come_back_in_order(
    fake_embeddings: FakeProviderServer,
) -> None:
    agency = _agency(fake_embeddings, EmbeddingProvider.OPENAI)
    texts = [f"memory number {i}" for i in range(5)]

    together = embeddings.embed(texts, agency_id=agency.id).vectors

    assert [r["input"] for r in _embedding_requests(fake_embeddings)] == [
        texts[0:2],
        texts[2:4],
        texts[4:5],
    ]
    alone = [embeddings.embed([t], agency_id=agency.id).vectors[0] for t in texts]
    assert together == alone


@override_settings(AGENTDESK_EMBEDDING_MAX_RETRIES=2)
def test_a_rate_limit_is_retried_by_the_sdk(fake_embeddings: FakeProviderServer) -> None:
    agency = _agency(fake_embeddings, EmbeddingProvider.OPENAI)
    fake_embeddings.enqueue(rate_limited(0.01), key="text-embedding-3-small")

    embedded = embeddings.embed(["hello"], agency_id=agency.id)

    assert len(embedded.vectors) == 1
    assert len(_embedding_requests(fake_embeddings)) == 2


@override_settings(AGENTDESK_EMBEDDING_MAX_RETRIES=1)
def test_an_outage_that_outlasts_the_retries_is_a_retryable_error(
    fake_embeddings: FakeProviderServer,
) -> None:
    agency = _agency(fake_embeddings, EmbeddingProvider.OPENAI)
    fake_embeddings.enqueue(server_error(503), server_error(503), key="text-embedding-3-small")

    with pytest.raises(embeddings.EmbeddingError, match="HTTP 503") as caught:
        embeddings.embed(["hello"], agency_id=agency.id)

    assert caught.value.code == "embedding_unavailable"
    assert caught.value.retryable


def test_a_refused_key_is_a_configuration_error(fake_embeddings: FakeProviderServer) -> None:
    agency = _agency(fake_embeddings, EmbeddingProvider.OPENAI)
    fake_embeddings.enqueue(
        HttpError(401, message="Incorrect API key provided"), key="text-embedding-3-small"
    )

    with pytest.raises(embeddings.EmbeddingError, match="Incorrect API key") as caught:
        embeddings.embed(["hello"], agency_id=agency.id)

    assert caught.value.code == "embedding_not_configured"
    assert not caught.value.retryable


def test_the_platform_key_is_never_sent_to_an_agency_endpoint(
    fake_embeddings: FakeProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-platform-secret")
    agency = _agency(fake_embeddings, EmbeddingProvider.OPENAI, api_key=None)

    with pytest.raises(embeddings.EmbeddingError, match="no API key") as caught:
        embeddings.embed(["hello"], agency_id=agency.id)

    assert caught.value.code == "embedding_not_configured"
    assert _embedding_requests(fake_embeddings) == []


def test_an_agency_endpoint_on_a_private_network_is_refused(
    fake_embeddings: FakeProviderServer, settings: object
) -> None:
    settings.AGENTDESK_LLM_PRIVATE_NETWORKS = []  # type: ignore[attr-defined]
    agency = _agency(fake_embeddings, EmbeddingProvider.OPENAI_COMPATIBLE, "fake-embed-384")

    with pytest.raises(embeddings.EmbeddingError, match="AGENTDESK_LLM_PRIVATE_NETWORKS"):
        embeddings.embed(["hello"], agency_id=agency.id)

    assert _embedding_requests(fake_embeddings) == []


def test_the_agency_wide_provider_row_of_the_chosen_kind_is_used(
    fake_embeddings: FakeProviderServer,
) -> None:
    agency = _agency(fake_embeddings, EmbeddingProvider.OPENAI)
    LLMProviderFactory.create(
        agency=agency, provider_name=ProviderName.ANTHROPIC, api_key="sk-ant-xxxx"
    )
    with tenancy.platform_context():
        Agency.objects.filter(pk=agency.pk).update(embedding_model="text-embedding-3-large")

    config = embeddings.config_for(agency.id)

    assert config.kind == "openai"
    assert config.model == "text-embedding-3-large"
    assert config.base_url == fake_embeddings.openai_base_url
    assert config.api_key == "sk-agency-key-1234"


def test_an_agency_on_the_local_model_needs_no_provider_row() -> None:
    agency = AgencyFactory.create()

    assert embeddings.config_for(agency.id) == embeddings.EmbeddingConfig()
    assert embeddings.model_for(agency.id) == "local:all-MiniLM-L6-v2"


def test_another_local_model_name_is_a_configuration_error() -> None:
    agency = AgencyFactory.create(embedding_model="all-mpnet-base-v2")

    with pytest.raises(embeddings.EmbeddingError, match="all-MiniLM-L6-v2") as caught:
        embeddings.embed(["hello"], agency_id=agency.id)

    assert caught.value.code == "embedding_not_configured"
