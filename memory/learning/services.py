"""The writers of learning: a finished run's quality (scored once, after the run, by
``memory.after_run``), a person's mark on it, the pattern learned from a good run and the
confidence of the patterns a run was given, and staff's edits of patterns.

After a run (:func:`learn_after_run`): the run's investigations are closed, its signals scored
(and the judge asked, when the agent wants one), a :class:`RunQuality` row written; then, if the
run is good (its score reaches ``agent.quality_threshold``, or a person marked it good) and the
agent's ``learning_enabled``, its approach is stored or reinforced as a pattern; the patterns it
was given gain confidence from a good run and lose it from a bad one.
"""

from __future__ import annotations

import logging
import uuid
from decimal import Decimal
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from agents.models import TERMINAL_STATUSES, Agent, Execution, ExecutionStatus
from core import tenancy
from core.exceptions import ApplicationError
from memory import extraction
from memory.learning import investigations, patterns, quality
from memory.learning.models import HumanMark, LearnedPattern, RunQuality

logger = logging.getLogger(__name__)

JUDGE_KEY = "quality_judge"  # on the run's result: what the judge cost


def learn_after_run(execution_id: uuid.UUID, *, agency_id: uuid.UUID) -> str:
    """Score the finished run and learn from it, once (a second call finds the score).
    Precondition: no transaction (the judge's model call holds none)."""
    with tenancy.agency_context(agency_id):
        execution = (
            Execution.objects.select_related("agent", "trigger_event")
            .filter(pk=execution_id)
            .first()
        )
        if execution is None or execution.status not in TERMINAL_STATUSES:
            return "missing"
        investigations.investigations_finish(execution)
        if RunQuality.objects.filter(execution_id=execution_id).exists():
            return "scored already"
        agent = execution.agent
        values = quality.signal_values(execution)
        judge = agent.quality_judge_enabled and execution.llm_call_count > 0
        digest = extraction.run_digest(execution) if judge else ""
    judgement = quality.judge(agent, execution, digest) if judge else None
    if judgement is not None and judgement.score is not None:
        values["judge"] = (judgement.score, f"{judgement.verdict}: {judgement.reason}"[:500])
    score, signals = quality.combine(values)
    vector = None
    if agent.learning_enabled and score >= float(agent.quality_threshold):
        # Embedded only for a pattern it will store: a repeat reinforces one (no vector used).
        with tenancy.agency_context(agency_id):
            new = patterns.teaches_new(execution)
        if new:
            vector = patterns.embedded(patterns.description(execution), agency_id=agency_id)
    with tenancy.agency_context(agency_id):
        row = RunQuality(
            agency_id=agency_id,
            execution_id=execution.pk,
            agent_id=agent.pk,
            score=score,
            signals=dict(signals),
            threshold=float(agent.quality_threshold),
            scored_at=timezone.now(),
        )
        if judgement is not None:
            row.judge_score = judgement.score
            row.judge_verdict = judgement.verdict[:20]
            row.judge_reason = judgement.reason
        try:
            with transaction.atomic():
                row.save()
        except IntegrityError:  # scored meanwhile by another delivery
            return "scored already"
        with transaction.atomic():
            _learn(row, execution, agent, vector=vector)
        if judgement is not None:
            extraction.note_on_run(execution, {JUDGE_KEY: quality.judge_note(judgement)})
    return f"scored {score:.2f}"


def _learn(
    row: RunQuality,
    execution: Execution,
    agent: Agent,
    *,
    vector: tuple[str, list[float]] | None = None,
) -> None:
    """What the run's (current) verdict teaches: the pattern of a good run (once), and the
    patterns it was given. Precondition: agency transaction."""
    good = row.is_good and (
        execution.status == ExecutionStatus.COMPLETED or row.human_mark == HumanMark.GOOD
    )
    patterns.uses_settle(execution=execution, good=good)
    if not agent.learning_enabled:
        return
    if good and row.pattern_id is None:
        if vector is None and patterns.teaches_new(execution):
            vector = patterns.embedded(patterns.description(execution), agency_id=row.agency_id)
        confidence = Decimal(str(round(max(row.score, 0.7), 2)))
        learned = patterns.pattern_learn(execution=execution, confidence=confidence, vector=vector)
        if learned is not None:
            row.pattern = learned
            row.save(update_fields=["pattern", "updated_at"])
    elif not good and row.pattern_id is not None:
        # Marked bad after it taught a pattern: the pattern loses what the run gave it.
        assert row.pattern is not None
        patterns.pattern_feedback(row.pattern, good=True, undo=True)
        patterns.pattern_feedback(row.pattern, good=False)
        row.pattern = None
        row.save(update_fields=["pattern", "updated_at"])


def quality_mark(
    *, execution: Execution, mark: str, note: str = "", user: Any = None
) -> RunQuality:
    """A person marks the finished run good or bad: the mark overrides the threshold (a run
    marked good teaches its pattern; one marked bad weakens the patterns it was given and the
    one it taught). A run not scored yet is scored now without the judge.
    Precondition: the run's agency context, inside a transaction (a request)."""
    if mark not in (HumanMark.GOOD, HumanMark.BAD):
        raise ApplicationError("invalid_mark", "The mark must be 'good' or 'bad'.")
    if execution.status not in TERMINAL_STATUSES:
        raise ApplicationError("not_finished", "Only a finished run can be marked.")
    with transaction.atomic():
        row = RunQuality.objects.select_for_update().filter(execution_id=execution.pk).first()
        agent = Agent.objects.get(pk=execution.agent_id)
        if row is None:
            score, signals = quality.combine(quality.signal_values(execution))
            row = RunQuality.objects.create(
                agency_id=execution.agency_id,
                execution_id=execution.pk,
                agent_id=agent.pk,
                score=score,
                signals=dict(signals),
                threshold=float(agent.quality_threshold),
                scored_at=timezone.now(),
            )
        row.human_mark = mark
        row.human_note = note[:2000]
        row.marked_by = user if getattr(user, "pk", None) is not None else None
        row.marked_at = timezone.now()
        row.save(update_fields=["human_mark", "human_note", "marked_by", "marked_at", "updated_at"])
        _learn(row, execution, agent)
    return row


PATTERN_EDITABLE = ("task_type", "description", "steps", "confidence", "is_active")


def pattern_update(*, pattern: LearnedPattern, **fields: Any) -> LearnedPattern:
    """Staff edit a pattern: its task type, description (embedded again), steps (the tool
    sequence follows them), confidence (0-1) or whether it is given to runs."""
    unknown = set(fields) - set(PATTERN_EDITABLE)
    if unknown:
        raise ApplicationError("invalid_field", f"Not editable: {', '.join(sorted(unknown))}.")
    if "confidence" in fields:
        confidence = Decimal(str(fields["confidence"]))
        if not 0 <= confidence <= 1:
            raise ApplicationError("invalid_confidence", "Confidence is between 0 and 1.")
        fields["confidence"] = confidence
    if "steps" in fields:
        steps = fields["steps"]
        if not isinstance(steps, list) or not all(
            isinstance(s, dict) and isinstance(s.get("tool"), str) and s["tool"] for s in steps
        ):
            raise ApplicationError(
                "invalid_steps", 'Steps are a list of {"tool": name, "arguments": {...}}.'
            )
        pattern.tool_sequence = [s["tool"] for s in steps]
        fields["tool_sequence"] = pattern.tool_sequence
    if "description" in fields and fields["description"] != pattern.description:
        vector = patterns.embedded(str(fields["description"]), agency_id=pattern.agency_id)
        if vector is not None:
            fields["embedding_model"], fields["embedding"] = vector
    for name, value in fields.items():
        setattr(pattern, name, value)
    pattern.save(update_fields=[*fields, "updated_at"])
    return pattern


def pattern_delete(*, pattern: LearnedPattern) -> None:
    """Forget a pattern (the runs it taught keep their scores)."""
    pattern.delete()
