"""Celery tasks of the memory app: thin wrappers over the services and the embeddings gateway.
(Episode, consolidation, conversation and retention jobs are written beside their rules.)"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from celery import Task, shared_task
from django.conf import settings
from django.db.models import Exists, OuterRef

from core import tenancy

# Celery's autodiscovery imports this module in the processes that run tasks (workers, eager
# tests); the episode, consolidation, conversation and retention jobs live beside their rules,
# and are registered from here rather than at every process's start (they import the LLM
# gateway: a third of a second of `manage.py check`).
from memory import consolidation, conversations, episodes, retention  # noqa: F401
from memory.embeddings import EmbeddingError, config_for
from memory.embeddings.backfill import (
    EMBED_PENDING_TASK,
    EPISODES,
    MEMORIES,
    embed_batch,
    pending,
)

logger = logging.getLogger(__name__)

# A provider that is down or rate-limiting is asked again this much later, this many times; the
# rows wait meanwhile (found by their words), and the next store or sweep sends the task again.
RETRY_SECONDS = 30
MAX_RETRIES = 5


@shared_task(name=EMBED_PENDING_TASK, bind=True, ignore_result=True)
def embed_pending(self: Task[Any, Any], *, agency_id: str | None = None) -> int:
    """Embed one batch (AGENTDESK_EMBEDDING_BATCH_SIZE) of the agency's memories and one of its
    episodes stored without a vector, then send itself again while more wait: a backlog is
    worked off a batch per task, and never holds a worker for long.

    Without ``agency_id`` (a sweep, e.g. from beat): one task for each agency with rows waiting.
    """
    if agency_id is None:
        return _sweep()
    agency = uuid.UUID(agency_id)
    limit = max(1, settings.AGENTDESK_EMBEDDING_BATCH_SIZE)
    written = 0
    more = False
    try:
        config = config_for(agency)
        for kind in (MEMORIES, EPISODES):
            batch = embed_batch(kind, agency_id=agency, config=config, where=pending(), limit=limit)
            written += batch.written
            more = more or batch.more
    except EmbeddingError as exc:
        if not exc.retryable:
            logger.warning("agency %s: stored rows not embedded: %s", agency_id, exc)
            return written
        raise self.retry(countdown=RETRY_SECONDS, max_retries=MAX_RETRIES, exc=exc) from exc
    if more:
        embed_pending.apply_async(kwargs={"agency_id": agency_id})
    return written


def _sweep() -> int:
    from core.models import Agency  # noqa: PLC0415 - loaded with the app registry
    from memory.models import Episode, Memory  # noqa: PLC0415

    waiting = [
        Exists(model.objects.filter(agency_id=OuterRef("pk"), embedding__isnull=True))
        for model in (Memory, Episode)
    ]
    with tenancy.platform_context():
        agencies = list(Agency.objects.filter(waiting[0] | waiting[1]).values_list("pk", flat=True))
    for agency in agencies:
        embed_pending.apply_async(kwargs={"agency_id": str(agency)})
    return len(agencies)
