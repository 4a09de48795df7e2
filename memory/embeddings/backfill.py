"""Embedding stored rows after the fact, a bounded batch at a time: memories and episodes stored
without a vector (``memory.embed_pending``), and those of another model after an agency changed
its own (``manage.py reembed_memories``).

A batch is read in one short transaction of the agency (row-level security applies), embedded
with no transaction open (a model call may take seconds), and written in a second one. A row is
written only if it still needs it and its text is the one embedded: a memory edited or embedded
meanwhile is left to its own embedding, never overwritten with a stale vector.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db.models import Model, Q

from core import tenancy
from memory.embeddings.gateway import embed_with
from memory.embeddings.types import EmbeddingConfig
from memory.models import Episode, Memory

# The task that embeds what waits (memory.tasks), named here so that the services that queue
# it need not import the tasks module (which imports them).
EMBED_PENDING_TASK = "memory.embed_pending"


@dataclass(frozen=True)
class Kind:
    """Rows of one model that carry an ``embedding`` and an ``embedding_model``."""

    label: str
    model: type[Model]
    text: Callable[[Any], str]  # what is embedded
    unchanged: Callable[[Any], dict[str, Any]]  # filter: the row still has the text embedded


MEMORIES = Kind(
    label="memories",
    model=Memory,
    text=lambda memory: memory.content,
    unchanged=lambda memory: {"content": memory.content},
)
EPISODES = Kind(
    label="episodes",
    model=Episode,
    text=Episode.embedded_text,
    # An episode is written once, complete (memory.episodes); its text does not change after.
    unchanged=lambda episode: {},
)


def pending() -> Q:
    """Rows stored without a vector (the provider failed, or the store was a web request's)."""
    return Q(embedding__isnull=True)


def stale(model_name: str) -> Q:
    """Rows without a vector of ``model_name``: the agency's model changed since."""
    return Q(embedding__isnull=True) | ~Q(embedding_model=model_name)


@dataclass(frozen=True)
class Batch:
    selected: int  # rows read (at most the limit)
    written: int  # rows given their vector (fewer if some changed meanwhile)
    more: bool  # rows beyond the limit matched too
    last_pk: Any  # for the next batch of the same pass (keyset: no rescanning)


def count(kind: Kind, *, agency_id: uuid.UUID, where: Q) -> int:
    with tenancy.agency_context(agency_id):
        return kind.model._default_manager.filter(where, agency_id=agency_id).count()


def embed_batch(
    kind: Kind,
    *,
    agency_id: uuid.UUID,
    config: EmbeddingConfig,
    where: Q,
    limit: int,
    after: Any = None,
) -> Batch:
    """Embed up to ``limit`` of the agency's rows matching ``where`` (primary key order, after
    ``after``) with ``config``. Raises :class:`EmbeddingError` with nothing written.
    Precondition: no transaction open (the model call must not hold one)."""
    model = kind.model
    rows = model._default_manager.filter(where, agency_id=agency_id).defer("embedding")
    if after is not None:
        rows = rows.filter(pk__gt=after)
    with tenancy.agency_context(agency_id):
        found = list(rows.order_by("pk")[: limit + 1])
    more = len(found) > limit
    found = found[:limit]
    if not found:
        return Batch(selected=0, written=0, more=False, last_pk=after)
    embedded = embed_with(config, [kind.text(row) for row in found])
    written = 0
    with tenancy.agency_context(agency_id):
        for row, vector in zip(found, embedded.vectors, strict=True):
            written += (
                model._default_manager.filter(where, pk=row.pk, agency_id=agency_id)
                .filter(**kind.unchanged(row))
                .update(embedding=vector, embedding_model=embedded.model)
            )
    return Batch(selected=len(found), written=written, more=more, last_pk=found[-1].pk)
