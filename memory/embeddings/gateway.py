"""Which model embeds for an agency, and the call: batches, unit vectors, the model's name."""

from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING

from django.conf import settings
from django.db.models import F

from agents.models import LLMProvider
from core import tenancy
from core.catalogue import CatalogueCache
from core.models import Agency
from memory.embeddings.types import (
    DIMENSIONS,
    LOCAL_MODEL,
    OPENAI_DEFAULT_MODEL,
    Embedded,
    EmbeddingConfig,
    EmbeddingError,
    EmbeddingKind,
)

if TYPE_CHECKING:
    from memory.embeddings.local import MiniLM

logger = logging.getLogger(__name__)

LOCAL = EmbeddingConfig()  # the embedded default: no key, no network

# Read on every search and store: kept per agency like the tool catalogue (core.catalogue).
_configs = CatalogueCache[EmbeddingConfig]()


def config_for(agency_id: uuid.UUID | None) -> EmbeddingConfig:
    """The agency's embedding model (``Agency.embedding_provider`` / ``embedding_model``) with
    the key and base URL of its active LLM provider row of that kind (the agency-wide row
    before a site's); the local model without an agency."""
    if agency_id is None:
        return LOCAL
    return _configs.get(agency_id, lambda: _load(agency_id))


def _load(agency_id: uuid.UUID) -> EmbeddingConfig:
    with tenancy.agency_context(agency_id):
        choice = Agency.objects.filter(pk=agency_id).values_list(
            "embedding_provider", "embedding_model"
        )
        chosen, model = choice.first() or ("local", "")
        if chosen not in ("openai", "openai_compatible"):
            return EmbeddingConfig(model=model or LOCAL_MODEL)
        row = (
            LLMProvider.objects.filter(agency_id=agency_id, provider_name=chosen, is_active=True)
            .order_by(F("site_id").asc(nulls_first=True), "-is_default")
            .first()
        )
    api_key = row.get_api_key() if row else None
    kind: EmbeddingKind = "openai" if chosen == "openai" else "openai_compatible"
    return EmbeddingConfig(
        kind=kind,
        model=model or (OPENAI_DEFAULT_MODEL if kind == "openai" else ""),
        api_key=api_key,
        base_url=(row.api_endpoint or None) if row else None,
        organization=(row.organization_id or None) if row and api_key else None,
    )


def clear_config_cache() -> None:
    _configs.clear()


def model_for(agency_id: uuid.UUID | None) -> str:
    """The name :func:`embed` records for the agency, without calling a model."""
    return config_for(agency_id).name


def embed(texts: Sequence[str], *, agency_id: uuid.UUID | None) -> Embedded:
    """Unit vectors of ``texts`` by the agency's model, in batches of
    AGENTDESK_EMBEDDING_BATCH_SIZE. Raises :class:`EmbeddingError`. Holds no transaction (a
    caller inside one keeps it open during a model call: embed first, then write)."""
    return embed_with(config_for(agency_id), texts)


def embed_with(config: EmbeddingConfig, texts: Sequence[str]) -> Embedded:
    texts = list(texts)
    if any(not isinstance(text, str) for text in texts):
        raise EmbeddingError("Only text can be embedded", code="embedding_bad_request")
    size = max(1, settings.AGENTDESK_EMBEDDING_BATCH_SIZE)
    vectors: list[list[float]] = []
    for start in range(0, len(texts), size):
        batch = texts[start : start + size]
        vectors.extend(_unit(v, config) for v in _embed_batch(config, batch))
    return Embedded(model=config.name, vectors=vectors)


def _embed_batch(config: EmbeddingConfig, texts: list[str]) -> list[list[float]]:
    if config.kind == "local":
        if config.model != LOCAL_MODEL:
            raise EmbeddingError(
                f"The local embedding model is {LOCAL_MODEL}, not {config.model!r}: clear the "
                "agency's embedding model, or choose an OpenAI(-compatible) provider.",
                code="embedding_not_configured",
            )
        model = local_model()
        with _local_lock:
            # One batch at a time per process: two at once would only compete for the cores
            # (and the BLAS threads) one of them is given, and finish no sooner.
            vectors: list[list[float]] = model.encode(texts, batch_size=len(texts)).tolist()
            return vectors
    if not config.model:
        raise EmbeddingError(
            "The agency's OpenAI-compatible embeddings need a model name (the agency's "
            "embedding model, e.g. nomic-embed-text).",
            code="embedding_not_configured",
        )
    from memory.embeddings.openai_provider import embed_openai  # noqa: PLC0415 - SDK on demand

    return embed_openai(config, texts)


def _unit(vector: list[float], config: EmbeddingConfig) -> list[float]:
    if len(vector) != DIMENSIONS:
        raise EmbeddingError(
            f"{config.name} gave a vector of {len(vector)} dimensions, not {DIMENSIONS}",
            code="embedding_bad_response",
        )
    norm = math.sqrt(math.fsum(v * v for v in vector))
    if not math.isfinite(norm) or norm == 0.0:
        raise EmbeddingError(f"{config.name} gave a zero vector", code="embedding_bad_response")
    return [v / norm for v in vector]


# --- the local model: loaded once per process, on first use ------------------------------------

_local: MiniLM | None = None
_load_lock = threading.Lock()
_local_lock = threading.Lock()


def local_model() -> MiniLM:
    """The local model, loaded on first use (about half a second; ~90 MB of weights) and kept
    for the life of the process. Thread-safe."""
    global _local  # noqa: PLW0603 - the process's one copy
    model = _local
    if model is not None:
        return model
    with _load_lock:
        if _local is None:
            from memory.embeddings.local import (  # noqa: PLC0415 - numpy and tokenizers on demand
                LocalModelMissing,
                MiniLM,
                limit_blas_threads,
                model_directory,
            )

            started = time.perf_counter()
            try:
                directory = model_directory()
                model = MiniLM(directory, max_tokens=settings.AGENTDESK_EMBEDDING_MAX_TOKENS)
            except LocalModelMissing as exc:
                raise EmbeddingError(str(exc), code="embedding_not_configured") from exc
            threads = settings.AGENTDESK_EMBEDDING_THREADS
            if threads > 0:
                limit_blas_threads(threads)
            _local = model
            logger.info(
                "local embedding model %s loaded from %s in %.2f s (%s BLAS threads)",
                LOCAL_MODEL,
                directory,
                time.perf_counter() - started,
                threads or "default",
            )
        return _local
