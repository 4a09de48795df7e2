"""What a run leaves to remember (seed 004's ``extractAndStore``): after the run, the agent's own
model reads a digest of it and answers with JSON — memories (fact / preference / pattern /
relationship / outcome, with subject, confidence, importance, tags and expiry), the lessons of the
run and whether it would act the same again — validated against :data:`EXTRACTION_SCHEMA` item by
item (an invalid memory is dropped, the others kept).

The call goes through the LLM gateway and is budgeted and counted like a run's steps
(memory.model_calls); its tokens and cost also go onto the run's ``result``
(``memory_extraction``), so that the run's page says what learning it cost.
"""

from __future__ import annotations

import datetime
import json
import logging
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db import connection
from django.utils import timezone
from jsonschema import Draft202012Validator

from agents.llm import Message
from agents.models import Agent, Execution, StepType
from memory.model_calls import ModelCall, agent_model_call
from memory.models import MemoryType

logger = logging.getLogger(__name__)

# The digest of a run the model reads: its last tool calls, each clipped.
DIGEST_ACTIONS = 30
DIGEST_VALUE_CHARS = 600
DIGEST_TEXT_CHARS = 3000
MAX_MEMORIES = 10
EXTRACTION_MAX_TOKENS = 1500

MEMORY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["type", "content"],
    "properties": {
        "type": {"enum": list(MemoryType.values)},
        "content": {"type": "string", "minLength": 3, "maxLength": 1000},
        "subject_type": {"type": ["string", "null"], "maxLength": 50},
        "subject_id": {
            "type": ["string", "null"],
            "pattern": "^[0-9a-fA-F]{8}-?([0-9a-fA-F]{4}-?){3}[0-9a-fA-F]{12}$",
        },
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "importance": {"type": "integer", "minimum": 1, "maximum": 10},
        "tags": {
            "type": "array",
            "maxItems": 10,
            "items": {"type": "string", "minLength": 1, "maxLength": 100},
        },
        "expires_in_days": {"type": ["integer", "null"], "minimum": 1, "maximum": 3650},
    },
}
EXTRACTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["memories"],
    "properties": {
        "memories": {"type": "array", "items": MEMORY_SCHEMA},
        "lessons": {
            "type": "array",
            "maxItems": 5,
            "items": {"type": "string", "minLength": 1, "maxLength": 500},
        },
        "should_repeat": {"type": ["boolean", "null"]},
    },
}
_memory_validator = Draft202012Validator(MEMORY_SCHEMA)
_lessons_validator = Draft202012Validator(EXTRACTION_SCHEMA["properties"]["lessons"])

EXTRACTION_PROMPT = """You review a finished run of an AI agent and decide what it should remember \
for its future runs. Extract only what will help later: facts learned about an entity or the \
situation, preferences of a customer or user, patterns that worked or failed, relationships \
between entities, and outcomes of actions. Skip what is obvious, temporary or already in the \
instruction. Each memory is one clear, self-contained statement (name the contact or company it \
is about). Extract at most {limit}; none is a fine answer.

Answer with one JSON object and nothing else, in this form:
{{"memories": [{{"type": "fact|preference|pattern|relationship|outcome",
  "content": "...", "subject_type": "contact|company|deal|... or null",
  "subject_id": "the entity's UUID from the run, or null", "confidence": 0.0-1.0,
  "importance": 1-10, "tags": ["..."], "expires_in_days": null or days until it stops being
  true}}],
 "lessons": ["what to do (or avoid) next time, at most 5"],
 "should_repeat": true or false (would you act the same way again?)}}"""


@dataclass(frozen=True, slots=True)
class ExtractedMemory:
    memory_type: str
    content: str
    subject_type: str = ""
    subject_id: uuid.UUID | None = None
    confidence: Decimal | None = None
    importance: int = 5
    tags: tuple[str, ...] = ()
    expires_at: datetime.datetime | None = None


@dataclass(frozen=True, slots=True)
class Extraction:
    memories: list[ExtractedMemory] = field(default_factory=list)
    lessons: list[str] = field(default_factory=list)
    should_repeat: bool | None = None
    rejected: int = 0  # memories the schema refused


@dataclass(frozen=True, slots=True)
class ExtractionCall:
    """The outcome of the model call: an extraction, or why there is none."""

    extraction: Extraction | None
    call: ModelCall

    @property
    def skipped(self) -> str:
        if self.call.skipped:
            return self.call.skipped
        return "not_json" if self.extraction is None else ""


def run_digest(execution: Execution) -> str:
    """What the run was asked, what it did and how it ended, for the extraction prompt.
    Precondition: agency context."""
    acts = list(
        execution.steps.filter(step_type=StepType.ACT)
        .order_by("-step_number")
        .values("tool_name", "tool_input", "tool_output")[:DIGEST_ACTIONS]
    )
    lines = [
        f"Trigger: {execution.trigger_type}",
        f"Instruction:\n{_clip(execution.first_user_message(), DIGEST_TEXT_CHARS)}",
        f"Status: {execution.status} ({execution.stop_reason or 'n/a'})",
    ]
    if acts:
        lines.append(f"Tool calls ({execution.tool_call_count} in all; the last {len(acts)}):")
        for act in reversed(acts):
            arguments = _clip(json.dumps(act["tool_input"], default=str), DIGEST_VALUE_CHARS)
            result = _clip(json.dumps(act["tool_output"], default=str), DIGEST_VALUE_CHARS)
            lines.append(f"- {act['tool_name']}({arguments}) -> {result}")
    if execution.output:
        lines.append(f"Final answer:\n{_clip(execution.output, DIGEST_TEXT_CHARS)}")
    if execution.error:
        lines.append(f"Error:\n{_clip(execution.error, DIGEST_VALUE_CHARS)}")
    return "\n".join(lines)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}..."


def parse_extraction(text: str, *, now: datetime.datetime | None = None) -> Extraction | None:
    """The model's answer, validated: None when it holds no JSON object (or array) at all.
    A JSON array is taken as the list of memories (seed 004 asks for one)."""
    data = _json_in(text)
    if data is None:
        return None
    if isinstance(data, list):
        data = {"memories": data}
    if not isinstance(data, dict):
        return None
    now = now or timezone.now()
    memories: list[ExtractedMemory] = []
    rejected = 0
    items = data.get("memories")
    for item in items if isinstance(items, list) else []:
        errors = list(_memory_validator.iter_errors(item))
        if errors or len(memories) >= MAX_MEMORIES:
            rejected += 1
            if errors:
                logger.info("extraction: memory refused (%s): %r", errors[0].message, item)
            continue
        memories.append(_memory(item, now))
    lessons = data.get("lessons")
    if not isinstance(lessons, list):
        lessons = []
    elif not _lessons_validator.is_valid(lessons):  # kept what can be kept
        lessons = [x[:500] for x in lessons if isinstance(x, str)][:5]
    repeat = data.get("should_repeat")
    return Extraction(
        memories=memories,
        lessons=[lesson.strip() for lesson in lessons if lesson.strip()],
        should_repeat=repeat if isinstance(repeat, bool) else None,
        rejected=rejected,
    )


def _memory(item: dict[str, Any], now: datetime.datetime) -> ExtractedMemory:
    days = item.get("expires_in_days")
    confidence = item.get("confidence")
    subject_id = item.get("subject_id")
    return ExtractedMemory(
        memory_type=item["type"],
        content=item["content"].strip(),
        subject_type=(item.get("subject_type") or "").strip()[:50],
        subject_id=uuid.UUID(subject_id) if subject_id else None,
        confidence=None if confidence is None else Decimal(str(round(confidence, 2))),
        importance=int(item.get("importance", 5)),
        tags=tuple(dict.fromkeys(t.strip() for t in item.get("tags") or [] if t.strip())),
        expires_at=now + datetime.timedelta(days=days) if days else None,
    )


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def _json_in(text: str) -> Any:
    """The JSON value the answer holds: all of it, a fenced block, or from the first brace."""
    candidates = [text.strip()]
    candidates += [m.group(1).strip() for m in _FENCE.finditer(text)]
    for opening, closing in (("{", "}"), ("[", "]")):
        start, end = text.find(opening), text.rfind(closing)
        if 0 <= start < end:
            candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    return None


def extraction_messages(digest: str) -> list[Message]:
    return [
        Message.system(EXTRACTION_PROMPT.format(limit=MAX_MEMORIES)),
        Message.user(f"The run:\n{digest}"),
    ]


def extract(*, agent: Agent, execution: Execution, digest: str) -> ExtractionCall:
    """Ask the model the run used what the run leaves to remember (budgeted and counted:
    memory.model_calls). Precondition: outside any transaction (a worker's task)."""
    snapshot = execution.config_snapshot or {}
    call = agent_model_call(
        agent=agent,
        messages=extraction_messages(digest),
        max_tokens=EXTRACTION_MAX_TOKENS,
        provider=str(snapshot.get("llm_provider") or ""),
        model=str(snapshot.get("llm_model") or ""),
        purpose="memory_extraction",
    )
    extraction = parse_extraction(call.text) if call.completion is not None else None
    return ExtractionCall(extraction, call)


def note_on_run(execution: Execution, notes: dict[str, Any]) -> None:
    """Add ``notes`` to the finished run's ``result`` (``memory_extraction``: what learning
    cost and gave). Precondition: agency context."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE agents_execution SET result = coalesce(result, '{}'::jsonb) || %s::jsonb"
            " WHERE id = %s",
            [json.dumps(notes, default=str), execution.id],
        )


def extracted_fields(memory: ExtractedMemory) -> dict[str, Any]:
    """``memory`` as keyword arguments of :func:`memory.services.memory_store`."""
    fields: dict[str, Any] = {
        "content": memory.content,
        "memory_type": memory.memory_type,
        "subject_type": memory.subject_type,
        "subject_id": memory.subject_id,
        "importance": memory.importance,
        "tags": memory.tags,
        "expires_at": memory.expires_at,
    }
    if memory.confidence is not None:
        fields["confidence"] = memory.confidence
    return fields


def lessons_text(lessons: Sequence[str]) -> str:
    return "; ".join(lessons)
