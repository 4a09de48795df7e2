"""OpenAI's embeddings (``text-embedding-3-small`` at the platform's dimension), or any server that
speaks OpenAI's ``/v1/embeddings`` (Ollama, vLLM, llama.cpp, LocalAI) through its base URL.

The SDK client is built as the chat provider builds its own (:mod:`agents.llm.openai_provider`):
the shared TLS context, an agency's own endpoint restricted to allowed addresses and sent none of
the platform's headers (:mod:`agents.llm.endpoints`), the platform's key never sent to it
(:func:`agents.llm.factory.resolve_api_key`). Retries (429, 5xx, timeouts, with the server's
Retry-After) are the SDK's own: an embedding call has no run deadline to respect.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import openai
from django.conf import settings

from agents.llm.endpoints import http_client, refusal, refuse_environment_headers
from agents.llm.errors import LLMConfigurationError
from agents.llm.factory import resolve_api_key
from agents.llm.types import ProviderConfig, ProviderKind
from memory.embeddings.types import DIMENSIONS, EmbeddingConfig, EmbeddingError

# OpenAI refuses inputs over 8,191 tokens; a memory or an episode is far shorter, and what
# decides its meaning is at its start. ~4 characters a token in English, fewer elsewhere.
MAX_INPUT_CHARS = 8000


def embed_openai(config: EmbeddingConfig, texts: Sequence[str]) -> list[list[float]]:
    """One request for ``texts``; vectors in the order given, each of :data:`DIMENSIONS`."""
    client = _client(config.kind, config.base_url, config.organization, _api_key(config))
    body: dict[str, Any] = {
        "model": config.model,
        # An empty input is refused by OpenAI; a blank one embeds as "nothing in particular".
        "input": [text[:MAX_INPUT_CHARS] or " " for text in texts],
        "encoding_format": "float",
    }
    if config.kind == "openai":
        # text-embedding-3 models shorten their vectors to the size asked for (and re-normalise).
        # Servers are not asked: many refuse the parameter, their model must have the size.
        body["dimensions"] = DIMENSIONS
    try:
        response = client.embeddings.create(**body)
    except Exception as exc:
        refused = refusal(exc)  # the agency's endpoint is not an allowed address
        if refused is not None:
            raise EmbeddingError(str(refused), code="embedding_not_configured") from exc
        if isinstance(exc, openai.APIError):
            raise _error(config, exc) from exc
        raise
    rows = sorted(response.data, key=lambda row: row.index)
    if len(rows) != len(texts) or any(not isinstance(row.embedding, list) for row in rows):
        raise EmbeddingError(
            f"{config.name}: the server answered {len(rows)} embeddings for {len(texts)} texts",
            code="embedding_bad_response",
        )
    vectors = [[float(value) for value in row.embedding] for row in rows]
    wrong = {len(vector) for vector in vectors} - {DIMENSIONS}
    if wrong:
        raise EmbeddingError(
            f"The embedding model {config.model!r} returns vectors of {sorted(wrong)[0]} "
            f"dimensions; memories are stored at {DIMENSIONS} (AGENTDESK_EMBEDDING_DIMENSIONS). "
            "Choose a model of that size for the agency, or the local model.",
            code="embedding_not_configured",
        )
    return vectors


def _api_key(config: EmbeddingConfig) -> str:
    kind: ProviderKind = "openai" if config.kind == "openai" else "openai_compatible"
    try:
        return resolve_api_key(
            ProviderConfig(
                kind=kind, model=config.model, api_key=config.api_key, base_url=config.base_url
            )
        )
    except LLMConfigurationError as exc:
        raise EmbeddingError(f"Embeddings: {exc.message}", code="embedding_not_configured") from exc


# A client is a connection pool: one per configuration and key, the most recent few kept.
@functools.lru_cache(maxsize=64)
def _client(kind: str, base_url: str | None, organization: str | None, api_key: str) -> Any:
    headers: dict[str, Any] | None = None
    if base_url is not None:
        refuse_environment_headers("OPENAI_CUSTOM_HEADERS")
        headers = {
            "OpenAI-Organization": organization or openai.Omit(),
            "OpenAI-Project": openai.Omit(),
        }
    return openai.OpenAI(
        api_key=api_key,
        base_url=base_url,
        organization=organization,
        timeout=settings.AGENTDESK_EMBEDDING_TIMEOUT_SECONDS,
        max_retries=settings.AGENTDESK_EMBEDDING_MAX_RETRIES,
        default_headers=headers,
        http_client=http_client(openai.DefaultHttpxClient, base_url),
    )


def clear_clients() -> None:
    """Forget the cached clients (after a key rotation; tests)."""
    _client.cache_clear()


def _error(config: EmbeddingConfig, exc: openai.APIError) -> EmbeddingError:
    where = f"{config.name} ({config.base_url})" if config.base_url else config.name
    if isinstance(exc, openai.APITimeoutError | openai.APIConnectionError):
        return EmbeddingError(
            f"{where}: no answer ({type(exc).__name__})",
            code="embedding_unavailable",
            retryable=True,
        )
    if isinstance(exc, openai.APIStatusError):
        detail = f"{where}: HTTP {exc.status_code}: {exc.message}"
        if exc.status_code == 429:
            return EmbeddingError(detail, code="embedding_rate_limited", retryable=True)
        if exc.status_code >= 500:
            return EmbeddingError(detail, code="embedding_unavailable", retryable=True)
        if exc.status_code in (401, 403):
            return EmbeddingError(detail, code="embedding_not_configured")
        return EmbeddingError(detail, code="embedding_bad_request")
    return EmbeddingError(f"{where}: {exc}", code="embedding_bad_response")
