"""Learned patterns (seed 000): the approach of a good run — its task type, the tools it used in
order and their key arguments generalised — stored for its agent, and given to the agent's later
runs whose task is like it.

- The task type is deterministic, model-free: the trigger type, then the event type of an event
  run, else the instruction's first verb and the first known object word
  (``manual:find/contact``).
- Arguments are generalised: ids, e-mail addresses, numbers, long texts and values that come from
  the run's trigger or instruction become ``<name>`` placeholders; short constants (a status, a
  channel) stay.
- A pattern with the same task type and tool sequence as a new one is reinforced instead of
  duplicated; a run given patterns that ends badly lowers their confidence.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from pgvector.django import CosineDistance

from agents.models import Agent, Execution, StepType
from memory import embeddings
from memory.learning.models import LearnedPattern, PatternOutcome, PatternUse

logger = logging.getLogger(__name__)

# A good run raises its patterns' confidence by this much; a bad one lowers it by more.
REINFORCE = Decimal("0.05")
PENALTY = Decimal("0.15")
INITIAL_CONFIDENCE_CAP = Decimal("0.90")
MIN_CONFIDENCE = 0.30  # below this a pattern is no longer given to runs
# Given to a run: the best few, within this many tokens of the system prompt.
CANDIDATES = 5
TOKEN_BUDGET = 300
CHARS_PER_TOKEN = 4
SOURCES_KEPT = 20
STEPS_KEPT = 20
DESCRIPTION_CHARS = 1000
KEPT_VALUE_CHARS = 40  # a string argument longer than this is free text: a placeholder

PROMPT_HEADING = "## Approaches that worked before"

STOPWORDS = frozenset({
    "a", "an", "the", "please", "kindly", "and", "or", "to", "for", "of", "in", "on", "at",
    "by", "with", "from", "into", "about", "this", "that", "these", "those", "it", "its", "is",
    "are", "be", "can", "could", "would", "should", "will", "you", "your", "me", "my", "our",
    "we", "i", "them", "then", "now", "just", "also", "all", "any", "some",
})  # fmt: skip
OBJECTS = (
    "contact", "company", "deal", "lead", "task", "note", "email", "mail", "meeting",
    "calendar", "invoice", "quote", "ticket", "order", "customer", "event", "report", "message",
)  # fmt: skip
_WORD = re.compile(r"[a-zA-Z][a-zA-Z'-]+")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-?([0-9a-fA-F]{4}-?){3}[0-9a-fA-F]{12}$")
_NUMBER = re.compile(r"^[+-]?\d[\d.,\s]*$")


def task_type(execution: Execution) -> str:
    """``<trigger type>:<event type>`` for an event run, else ``<trigger type>:<verb>/<object>``
    from the instruction's words (either part may be missing)."""
    kind = execution.trigger_type or "run"
    if execution.trigger_event_id is not None:
        event = getattr(execution.trigger_event, "event_type", "")
        if event:
            return f"{kind}:{event}"[:200]
    words = [w.lower() for w in _WORD.findall(execution.input or "")]
    words = [w for w in words if w not in STOPWORDS]
    verb = words[0] if words else ""
    noun = next((o for w in words for o in OBJECTS if w.rstrip("s") == o), "")
    label = "/".join(part for part in (verb, noun) if part)
    return f"{kind}:{label or 'task'}"[:200]


def _trigger_values(execution: Execution) -> dict[str, str]:
    """Values of the trigger's payload (and the run's input words) by their names, lower-cased:
    an argument equal to one is the run's data, not the approach."""
    found: dict[str, str] = {}

    def walk(value: Any, key: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, str(k))
        elif isinstance(value, list):
            for item in value:
                walk(item, key)
        elif isinstance(value, str | int | float) and not isinstance(value, bool):
            text = str(value).strip().lower()
            if text:
                found.setdefault(text, key)

    walk(execution.trigger_data or {}, "value")
    return found


def generalise(  # noqa: PLR0911 - a return per kind of value
    arguments: Any, *, known: dict[str, str], instruction: str, key: str = "value"
) -> Any:
    """``arguments`` with concrete values replaced by ``<name>`` placeholders."""
    if isinstance(arguments, dict):
        return {
            k: generalise(v, known=known, instruction=instruction, key=str(k))
            for k, v in arguments.items()
        }
    if isinstance(arguments, list):
        return [generalise(v, known=known, instruction=instruction, key=key) for v in arguments]
    if isinstance(arguments, bool) or arguments is None:
        return arguments
    name = f"<{key}>"
    if isinstance(arguments, int | float):
        return name
    text = str(arguments).strip()
    lowered = text.lower()
    if (
        key == "id"
        or key.endswith("_id")
        or _UUID.match(text)
        or _EMAIL.match(text)
        or _NUMBER.match(text)
        or len(text) > KEPT_VALUE_CHARS
    ):
        return name
    if lowered in known:
        return f"<{known[lowered]}>" if key == "value" else name
    if lowered and lowered in instruction:
        return name
    return text


def approach(execution: Execution) -> list[dict[str, Any]]:
    """The run's tool calls in order, arguments generalised. Precondition: agency context."""
    known = _trigger_values(execution)
    instruction = (execution.input or "").lower()
    acts = (
        execution.steps.filter(step_type=StepType.ACT)
        .exclude(tool_name="")
        .order_by("step_number")
        .values_list("tool_name", "tool_input", "tool_output")
    )
    steps: list[dict[str, Any]] = []
    for name, arguments, output in acts:
        if isinstance(output, dict) and "error" in output:
            continue  # a failed call is not part of what worked
        steps.append(
            {
                "tool": name,
                "arguments": generalise(arguments or {}, known=known, instruction=instruction),
            }
        )
    return steps[:STEPS_KEPT]


def description(execution: Execution) -> str:
    return " ".join(execution.first_user_message().split())[:DESCRIPTION_CHARS]


def teaches_new(execution: Execution) -> bool:
    """Whether the run, if good, would store a new pattern rather than reinforce the agent's
    pattern of its task type and tool sequence (or learn nothing, having used no tool): only a
    new pattern needs the description's embedding. Precondition: the run's agency context."""
    steps = approach(execution)
    if not steps:
        return False
    return not LearnedPattern.objects.filter(
        agent_id=execution.agent_id,
        task_type=task_type(execution),
        tool_sequence=[s["tool"] for s in steps],
    ).exists()


def pattern_learn(
    *, execution: Execution, confidence: Decimal, vector: tuple[str, list[float]] | None
) -> LearnedPattern | None:
    """Store the good run's approach, or reinforce the agent's pattern of the same task type and
    tool sequence. None for a run that used no tool (nothing to learn).
    Precondition: the run's agency transaction."""
    steps = approach(execution)
    if not steps:
        return None
    kind = task_type(execution)
    sequence = [s["tool"] for s in steps]
    existing = (
        LearnedPattern.objects.select_for_update()
        .filter(agent_id=execution.agent_id, task_type=kind, tool_sequence=sequence)
        .first()
    )
    if existing is not None:
        existing.success_count += 1
        existing.confidence = min(Decimal("0.99"), existing.confidence + REINFORCE)
        existing.source_executions = [*existing.source_executions, execution.pk][-SOURCES_KEPT:]
        existing.is_active = True
        existing.save(
            update_fields=[
                "success_count", "confidence", "source_executions", "is_active", "updated_at"
            ]
        )  # fmt: skip
        return existing
    pattern = LearnedPattern(
        agency_id=execution.agency_id,
        agent_id=execution.agent_id,
        task_type=kind,
        description=description(execution),
        tool_sequence=sequence,
        steps=steps,
        confidence=min(INITIAL_CONFIDENCE_CAP, confidence),
        success_count=1,
        source_executions=[execution.pk],
    )
    if vector is not None:
        pattern.embedding_model, pattern.embedding = vector
    pattern.save()
    return pattern


def embedded(text: str, *, agency_id: Any) -> tuple[str, list[float]] | None:
    """The text's embedding (model, vector), or None when the embedding provider fails."""
    try:
        result = embeddings.embed([text], agency_id=agency_id)
    except embeddings.EmbeddingError as exc:
        logger.warning("learned pattern not embedded: %s", exc)
        return None
    return result.model, result.vectors[0]


def pattern_feedback(pattern: LearnedPattern, *, good: bool, undo: bool = False) -> None:
    """A run given ``pattern`` went well (more confidence) or badly (less); ``undo`` takes a
    previous feedback back (a person's mark turned the run's outcome round).
    Precondition: agency transaction."""
    locked = LearnedPattern.objects.select_for_update().get(pk=pattern.pk)
    sign = -1 if undo else 1
    if good:
        locked.success_count = max(0, locked.success_count + sign)
        locked.confidence += sign * REINFORCE
    else:
        locked.failure_count = max(0, locked.failure_count + sign)
        locked.confidence -= sign * PENALTY
    locked.confidence = min(Decimal("0.99"), max(Decimal(0), locked.confidence))
    locked.save(update_fields=["success_count", "failure_count", "confidence", "updated_at"])
    pattern.confidence = locked.confidence


def uses_settle(*, execution: Execution, good: bool) -> int:
    """The patterns the run was given learn its outcome, once (a changed outcome, from a
    person's mark, undoes the earlier one first). Returns how many changed.
    Precondition: agency transaction."""
    outcome = PatternOutcome.SUCCESS if good else PatternOutcome.FAILURE
    changed = 0
    for use in PatternUse.objects.select_related("pattern").filter(execution_id=execution.pk):
        if use.outcome == outcome:
            continue
        if use.outcome:
            pattern_feedback(use.pattern, good=use.outcome == PatternOutcome.SUCCESS, undo=True)
        pattern_feedback(use.pattern, good=good)
        use.outcome = outcome
        use.save(update_fields=["outcome", "updated_at"])
        changed += 1
    return changed


# --- at run start -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Given:
    pattern: LearnedPattern
    similarity: float
    line: str


def pattern_line(pattern: LearnedPattern) -> str:
    steps = " -> ".join(
        f"{s['tool']}({_arguments(s.get('arguments') or {})})" for s in pattern.steps
    )
    good, bad = pattern.success_count, pattern.failure_count
    tally = f"{good} good run{'' if good == 1 else 's'}"
    if bad:
        tally += f", {bad} bad"
    return f"For {pattern.task_type} (confidence {pattern.confidence:.2f}, {tally}): {steps}"


def _arguments(arguments: dict[str, Any]) -> str:
    text = ", ".join(
        f"{k}={json.dumps(v, default=str) if not isinstance(v, str) else v}"
        for k, v in arguments.items()
    )
    return text if len(text) <= 200 else f"{text[:197]}..."


def patterns_for_run(agent: Agent, execution: Execution) -> list[Given]:
    """The agent's patterns most like the run's task (cosine similarity of the embeddings, times
    the confidence; the same task type first), within :data:`TOKEN_BUDGET`. Cheap for an agent
    that learns nothing or has no pattern (one indexed read, no embedding).
    Precondition: the run's agency context."""
    if not agent.learning_enabled or not _has_patterns(agent):
        return []
    kind = task_type(execution)
    vector = embedded(description(execution), agency_id=agent.agency_id)
    patterns = LearnedPattern.objects.filter(
        agency_id=agent.agency_id, agent_id=agent.pk, is_active=True,
        confidence__gte=MIN_CONFIDENCE,
    )  # fmt: skip
    scored: list[tuple[float, LearnedPattern]] = []
    if vector is not None:
        model, values = vector
        candidates = (
            patterns.filter(embedding_model=model)
            .annotate(distance=CosineDistance("embedding", values))
            .order_by("distance")[: CANDIDATES * 2]
        )
        least = settings.AGENTDESK_MEMORY_RECALL_MIN_SIMILARITY
        for candidate in candidates:
            similarity = 1.0 - float(candidate.distance)
            if similarity >= least:
                scored.append((similarity, candidate))
    # The same task type counts even when its text is not alike (or not embedded).
    seen = {p.pk for _, p in scored}
    for same in patterns.filter(task_type=kind).exclude(pk__in=seen)[:CANDIDATES]:
        scored.append((0.0, same))
    scored.sort(
        key=lambda sp: (sp[1].task_type == kind, sp[0] * float(sp[1].confidence)), reverse=True
    )
    budget = TOKEN_BUDGET * CHARS_PER_TOKEN
    given: list[Given] = []
    for similarity, pattern in scored[:CANDIDATES]:
        line = pattern_line(pattern)
        if len(line) > budget:
            continue
        budget -= len(line)
        given.append(Given(pattern, similarity, line))
    return given


def _has_patterns(agent: Agent) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT EXISTS (SELECT FROM {LearnedPattern._meta.db_table}"  # noqa: S608 - constant
            " WHERE agency_id = %s AND agent_id = %s AND is_active)",
            [agent.agency_id, agent.pk],
        )
        row = cursor.fetchone()
    return bool(row and row[0])


def with_patterns(prompt: str, agent: Agent, execution: Execution) -> str:
    """The run's system prompt with the approaches that worked before for tasks like its own;
    which ones it was given is recorded (their confidence follows the run's outcome).
    Precondition: the run's agency transaction (its first claim)."""
    if not agent.learning_enabled:
        return prompt
    try:
        with transaction.atomic():  # a savepoint: a failure here leaves the claim's transaction
            given = patterns_for_run(agent, execution)
    except Exception:  # learning must never keep a run from starting
        logger.exception("execution %s: learned patterns not recalled", execution.pk)
        return prompt
    if not given:
        return prompt
    PatternUse.objects.bulk_create(
        [
            PatternUse(
                agency_id=execution.agency_id,
                execution_id=execution.pk,
                pattern_id=g.pattern.pk,
                similarity=round(g.similarity, 4),
            )
            for g in given
        ],
        ignore_conflicts=True,
    )
    LearnedPattern.objects.filter(pk__in=[g.pattern.pk for g in given]).update(
        last_used_at=timezone.now()
    )
    lines = "\n".join(f"- {g.line}" for g in given)
    section = (
        f"{PROMPT_HEADING}\nApproaches that worked before for similar tasks (placeholders in "
        f"<angle brackets> stand for this run's own values):\n{lines}"
    )
    return f"{prompt}\n\n{section}" if prompt else section
