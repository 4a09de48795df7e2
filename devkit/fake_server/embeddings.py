"""OpenAI's ``/v1/embeddings`` for the fake provider: deterministic unit vectors, no model.

A text's vector is the normalised sum of one pseudo-random vector per word (seeded by the word,
so the same on every run and machine) and one for the whole text: texts that share words are
near each other, the same text always gives the same vector, and different texts differ. Enough
to test a client and a search through the real SDK; nothing about meaning.

The size is the request's ``dimensions``, else the model's: a name like ``fake-embed-768`` ends
with it, any other model has text-embedding-3-small's 1,536. ``encoding_format`` ``base64``
(what the ``openai`` SDK asks for by default) is answered as OpenAI does: little-endian float32.

Pure standard library, as the rest of the fake server.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import math
import re
import struct
from typing import Any

PATH = "/v1/embeddings"
DEFAULT_DIMENSIONS = 1536  # text-embedding-3-small's own size
MAX_DIMENSIONS = 4096
_SIZED_MODEL = re.compile(r"^fake[\w.-]*-(\d+)$")
_WORD = re.compile(r"\w+")


class InvalidRequest(ValueError):
    """Answered 400 with OpenAI's error shape."""


def model_dimensions(model: str) -> int:
    match = _SIZED_MODEL.match(model)
    return int(match.group(1)) if match else DEFAULT_DIMENSIONS


def response(body: dict[str, Any]) -> dict[str, Any]:
    """The JSON answer to an embeddings request body; raises :class:`InvalidRequest`."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidRequest("you must provide a model parameter")
    inputs = body.get("input")
    if isinstance(inputs, str):
        inputs = [inputs]
    if not isinstance(inputs, list) or not inputs or not all(isinstance(t, str) for t in inputs):
        raise InvalidRequest("'input' must be a string or a non-empty list of strings")
    if any(not text for text in inputs):
        raise InvalidRequest("'$.input' is invalid: an input must not be empty")
    dimensions = body.get("dimensions", model_dimensions(model))
    if not isinstance(dimensions, int) or isinstance(dimensions, bool):
        raise InvalidRequest("'dimensions' must be an integer")
    if not 1 <= dimensions <= MAX_DIMENSIONS:
        raise InvalidRequest(f"'dimensions' must be between 1 and {MAX_DIMENSIONS}")
    encoding = body.get("encoding_format", "float")
    if encoding not in ("float", "base64"):
        raise InvalidRequest("'encoding_format' must be 'float' or 'base64'")
    data = []
    tokens = 0
    for index, text in enumerate(inputs):
        vector = embedding(text, dimensions)
        tokens += len(_WORD.findall(text)) or 1
        value: list[float] | str = vector
        if encoding == "base64":
            value = base64.b64encode(struct.pack(f"<{dimensions}f", *vector)).decode()
        data.append({"object": "embedding", "index": index, "embedding": value})
    return {
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def embedding(text: str, dimensions: int) -> list[float]:
    """The unit vector of ``text`` (see the module docstring)."""
    total = list(_seeded("\x00text\x00" + text, dimensions))
    for word in _WORD.findall(text.lower()):
        for i, value in enumerate(_seeded(word, dimensions)):
            total[i] += 2.0 * value  # words weigh more than the whole text's own component
    norm = math.sqrt(math.fsum(v * v for v in total)) or 1.0
    return [v / norm for v in total]


@functools.lru_cache(maxsize=4096)
def _seeded(seed: str, dimensions: int) -> tuple[float, ...]:
    """``dimensions`` values in [-1, 1) from the seed's BLAKE2b stream."""
    values: list[float] = []
    counter = 0
    while len(values) < dimensions:
        digest = hashlib.blake2b(f"{counter}:{seed}".encode(), digest_size=64).digest()
        values.extend(v / 2147483648.0 for v in struct.unpack("<16i", digest))
        counter += 1
    return tuple(values[:dimensions])
