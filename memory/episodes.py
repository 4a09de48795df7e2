"""Episodes: what each finished run did and how it went (seed 004 ``ai_agent_episodes``), and what
happens after a run ends.

The episode's row (trigger, situation, actions, outcome) is written with the run's end, in its
last transaction (:func:`episode_record`: one read of the run's tool calls, one insert). Once that
commits, :func:`after_run` (after-run work, agents/after_run.py: recorded with the run's end,
sent again until it is done) completes it: the agent's model
extracts what is worth remembering (memory.extraction, when the agent's
``memory_extraction_enabled``) and the lessons of the run; the memories are stored with
deduplication (memory.services.memory_store); the episode is embedded, so that later runs find it
among "similar past situations" (memory.search.search_episodes); and the run's instruction and
answer are added to the conversation it continued (memory.conversations).
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

from django.db import connection, transaction
from django.utils import timezone
from redis.exceptions import RedisError

from agents import after_run as after_run_work
from agents.models import Agent, Execution, ExecutionStatus
from core import fastdb, tenancy
from core.exceptions import ApplicationError
from memory import embeddings, extraction
from memory.conversations import ConversationKey, conversation_append
from memory.learning.services import learn_after_run
from memory.models import Episode, EpisodeOutcome
from tools.ratelimit import get_redis

logger = logging.getLogger(__name__)

AFTER_RUN_TASK = "memory.after_run"
CLAIM_PREFIX = "agentdesk:after_run"
CLAIM_TTL = 900  # seconds: longer than an extraction call (memory.model_calls) and the writes
# On the run's ``result`` once its episode is complete: a later delivery does nothing.
DONE_KEY = "memory_after_run"
ACTIONS_KEPT = 100


def episode_record(execution: Execution) -> None:
    """The finished run's episode, in its last transaction (:func:`after_run` completes it). A
    run finishes once (its status guard), so this is a plain insert.
    Precondition: the run's agency transaction."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tool_name, status FROM tools_toolcall WHERE execution_id = %s"
            " ORDER BY created_at LIMIT %s",
            [execution.id, ACTIONS_KEPT],
        )
        actions = cursor.fetchall()
    succeeded = execution.status == ExecutionStatus.COMPLETED
    outcome = EpisodeOutcome.SUCCESS if succeeded else EpisodeOutcome.FAILURE
    fastdb.insert(
        Episode(
            agency_id=execution.agency_id,
            agent_id=execution.agent_id,
            site_id=execution.site_id,
            execution_id=execution.id,
            trigger_event=execution.trigger_type,
            context_summary=(execution.input or json.dumps(execution.trigger_data, default=str))[
                :2000
            ],
            actions_taken=[{"tool": name, "status": status} for name, status in actions],
            outcome=outcome,
            outcome_details=(execution.output or execution.error)[:4000],
            duration_ms=execution.duration_ms,
            tokens_used=execution.tokens_total,
        )
    )


@after_run_work.task(AFTER_RUN_TASK)
def after_run(execution_id: str, *, agency_id: str) -> str:
    """Complete a finished run's episode (module docstring), once (a second delivery of the
    message finds it done); then its quality score and what it teaches (memory.learning).
    While another delivery completes the episode, that one scores the run too."""
    done = episode_complete(uuid.UUID(execution_id), agency_id=uuid.UUID(agency_id))
    if done == "in progress":
        raise after_run_work.Busy("its episode is being completed")
    return f"{done}; {learn_after_run(uuid.UUID(execution_id), agency_id=uuid.UUID(agency_id))}"


def episode_complete(execution_id: uuid.UUID, *, agency_id: uuid.UUID) -> str:
    """:func:`after_run`'s work; returns what it did. The model call and the embedding hold no
    transaction; the writes are one transaction at the end. A second delivery while the first
    works ("in progress") or after it ("done already") does nothing.
    Precondition: no transaction."""
    if not _claim(execution_id):
        return "in progress"
    try:
        return _complete(execution_id, agency_id=agency_id)
    finally:
        # Done (the run's result says so from now on) or failed (a retry or a later delivery
        # may try again at once, not CLAIM_TTL later).
        _release(execution_id)


def _complete(execution_id: uuid.UUID, *, agency_id: uuid.UUID) -> str:
    with tenancy.agency_context(agency_id):
        execution = Execution.objects.select_related("agent").filter(pk=execution_id).first()
        episode = Episode.objects.filter(execution_id=execution_id).defer("embedding").first()
        if execution is None or episode is None:
            return "missing"
        if DONE_KEY in (execution.result or {}):
            return "done already"
        digest = ""
        agent = execution.agent
        learn = agent.memory_extraction_enabled and execution.llm_call_count > 0
        if learn:
            digest = extraction.run_digest(execution)
    call = extraction.extract(agent=agent, execution=execution, digest=digest) if learn else None
    found = call.extraction if call is not None else None
    if found is not None:
        episode.lessons_learned = found.lessons
        episode.should_repeat = found.should_repeat
    # (memory.embed_pending may have embedded it meanwhile, without its lessons)
    vector = _embedded(episode) if found is not None or not episode.embedding_model else None
    with tenancy.agency_context(agency_id):
        stored, reinforced = _store(agent, execution, found.memories if found else [])
        fields = ["lessons_learned", "should_repeat"]
        if vector is not None:
            episode.embedding_model, episode.embedding = vector
            fields += ["embedding_model", "embedding"]
        episode.save(update_fields=[*fields, "updated_at"])
        _continue_conversation(agent, execution)
        notes: dict[str, Any] = {DONE_KEY: timezone.now().isoformat()}
        if call is not None:
            notes["memory_extraction"] = _note(call, stored=stored, reinforced=reinforced)
        extraction.note_on_run(execution, notes)
    return f"{stored} stored, {reinforced} reinforced"


def _claim(execution_id: uuid.UUID) -> bool:
    """This delivery's turn to complete the episode (a Redis key for the task's longest time:
    the model call is not held in a transaction, so no row lock can say so). Without Redis the
    run's ``result`` decides (``done already``)."""
    try:
        return bool(get_redis().set(f"{CLAIM_PREFIX}:{execution_id}", 1, nx=True, ex=CLAIM_TTL))
    except RedisError as exc:
        logger.warning("after-run of %s unguarded: %s", execution_id, exc)
        return True


def _release(execution_id: uuid.UUID) -> None:
    try:
        get_redis().delete(f"{CLAIM_PREFIX}:{execution_id}")
    except RedisError as exc:  # the claim then lapses after CLAIM_TTL
        logger.warning("after-run claim of %s not released: %s", execution_id, exc)


def _embedded(episode: Episode) -> tuple[str, list[float]] | None:
    try:
        result = embeddings.embed([episode.embedded_text()], agency_id=episode.agency_id)
    except embeddings.EmbeddingError as exc:
        logger.warning("episode %s not embedded: %s", episode.id, exc)
        return None
    return result.model, result.vectors[0]


def _store(
    agent: Agent, execution: Execution, memories: list[extraction.ExtractedMemory]
) -> tuple[int, int]:
    """Store the extracted memories (a near-identical one reinforces the agent's existing
    memory instead); returns (stored, reinforced). One the store refuses is skipped."""
    from memory.services import memory_store  # noqa: PLC0415 - services import search, models

    stored = reinforced = 0
    for memory in memories:
        try:
            with transaction.atomic():
                result = memory_store(
                    agent=agent,
                    source="extraction",
                    execution_id=execution.id,
                    **extraction.extracted_fields(memory),
                )
        except ApplicationError as exc:
            logger.info("extracted memory refused by the store: %s", exc)
            continue
        if result.created:
            stored += 1
        else:
            reinforced += 1
    return stored, reinforced


def _continue_conversation(agent: Agent, execution: Execution) -> None:
    """The run's instruction and answer, added to the conversation it continued."""
    key = (execution.config_snapshot or {}).get("conversation_key")
    if not key or agent.conversation_window <= 0:
        return
    answer = execution.output
    if not answer:  # (a run that failed before answering adds nothing to the conversation)
        return
    conversation_append(
        agent=agent,
        key=ConversationKey.from_dict(key),
        messages=[
            {"role": "user", "content": execution.first_user_message()},
            {"role": "assistant", "content": answer},
        ],
        tokens=execution.tokens_total,
        metadata={"first_execution_id": str(execution.id)},
    )


def _note(found: extraction.ExtractionCall, *, stored: int, reinforced: int) -> dict[str, Any]:
    call = found.call
    note: dict[str, Any] = {
        "model": call.model,
        "tokens": call.tokens,
        "cost_usd": str(call.cost),
        "stored": stored,
        "reinforced": reinforced,
    }
    if found.extraction is not None and found.extraction.rejected:
        note["rejected"] = found.extraction.rejected
    if found.skipped:
        note["skipped"] = found.skipped
    if call.error:
        note["error"] = call.error
    return note
