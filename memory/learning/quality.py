"""A finished run's quality score (seed 000 "quality scoring"): a weighted mean of explicit
signals, each 0-1, with what each contributed kept beside the score:

- ``goal``: the run completed with a final answer (1), or ended otherwise (0);
- ``tools``: the share of its tool calls that did not fail (1 with none);
- ``corrections``: self-correction rounds (a tool failing ``max_corrections`` times asks a person),
  each costing a third;
- ``human``: approvals denied (a half each), approvals edited (a quarter), questions asked of a
  person (a tenth);
- ``completeness``: flow's completeness analysis of the run, when its agent has an expected
  workflow (left out otherwise: the other weights share its part);
- ``judge``: the agent's own model reads a digest of the run and scores it, when
  ``agent.quality_judge_enabled`` (one model call, budgeted and counted like memory extraction:
  memory.model_calls).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, TypedDict

from django.db.models import Count, Q

from agents.llm import Message
from agents.models import Agent, Execution, ExecutionStatus, StopReason
from approvals.models import Approval, ApprovalStatus, Question, QuestionKind
from flow.completeness import analyse_and_save
from flow.models import CompletenessAnalysis
from memory import extraction
from memory.model_calls import ModelCall, agent_model_call
from tools.models import ToolCall, ToolCallStatus

logger = logging.getLogger(__name__)

WEIGHTS: dict[str, float] = {
    "goal": 0.40,
    "tools": 0.20,
    "corrections": 0.10,
    "human": 0.15,
    "completeness": 0.15,
    "judge": 0.30,
}
JUDGE_MAX_TOKENS = 300

JUDGE_PROMPT = """You review a finished run of an AI agent and judge how well it did its task: \
did it reach the goal, with the right tools and arguments, without needless steps or errors, and \
is its final answer correct and useful? Answer with one JSON object and nothing else:
{"score": 0.0-1.0, "verdict": "good" or "bad", "reason": "one or two sentences"}"""


class SignalDict(TypedDict):
    value: float
    weight: float
    contribution: float
    detail: str


@dataclass(frozen=True, slots=True)
class Judgement:
    score: float | None
    verdict: str  # "good", "bad", or "skipped: <why>"
    reason: str
    call: ModelCall | None = None


def signal_values(execution: Execution) -> dict[str, tuple[float, str]]:
    """Each signal's value (0-1) and what it is made of, but the judge's.
    Precondition: the run's agency context."""
    values: dict[str, tuple[float, str]] = {}
    reached = (
        execution.status == ExecutionStatus.COMPLETED
        and execution.stop_reason == StopReason.FINAL_ANSWER
    )
    values["goal"] = (
        1.0 if reached else 0.0,
        f"{execution.status} ({execution.stop_reason or 'no stop reason'})",
    )
    calls = ToolCall.objects.filter(execution_id=execution.pk).aggregate(
        total=Count("pk"), failed=Count("pk", filter=Q(status=ToolCallStatus.FAILED))
    )
    total, failed = calls["total"], calls["failed"]
    values["tools"] = (
        1.0 - failed / total if total else 1.0,
        f"{failed} of {total} tool calls failed",
    )
    asked = Question.objects.filter(execution_id=execution.pk).aggregate(
        corrections=Count("pk", filter=Q(kind=QuestionKind.CORRECTION)),
        questions=Count("pk", filter=Q(kind=QuestionKind.QUESTION)),
    )
    corrections = asked["corrections"]
    values["corrections"] = (
        max(0.0, 1.0 - corrections / 3),
        f"{corrections} self-correction rounds",
    )
    decided = Approval.objects.filter(execution_id=execution.pk).aggregate(
        denied=Count("pk", filter=Q(status=ApprovalStatus.DENIED)),
        edited=Count("pk", filter=Q(edited_arguments__isnull=False)),
    )
    denied, edited, questions = decided["denied"], decided["edited"], asked["questions"]
    values["human"] = (
        max(0.0, 1.0 - 0.5 * denied - 0.25 * edited - 0.1 * questions),
        f"{denied} approvals denied, {edited} edited, {questions} questions asked",
    )
    completeness = _completeness(execution)
    if completeness is not None:
        values["completeness"] = completeness
    return values


def _completeness(execution: Execution) -> tuple[float, str] | None:
    """flow's completeness analysis of the run (made now if its agent has a workflow and beat
    has not analysed it yet), or None."""
    analysis = CompletenessAnalysis.objects.filter(execution_id=execution.pk).first()
    if analysis is None:
        try:
            analysis = analyse_and_save(execution.pk)
        except Exception:  # flow's bug must not lose the run's score
            logger.exception("execution %s: completeness analysis failed", execution.pk)
            return None
    if analysis is None:
        return None
    missing = [*analysis.missing_states, *analysis.missing_actions]
    detail = f"{analysis.completeness_score:.0%} of the expected workflow"
    if missing:
        detail += f"; missing {', '.join(missing[:5])}"
    return analysis.completeness_score, detail


def combine(values: dict[str, tuple[float, str]]) -> tuple[float, dict[str, SignalDict]]:
    """The weighted mean of the signals present, and each one's part of it."""
    weights = {name: WEIGHTS[name] for name in values}
    total = sum(weights.values()) or 1.0
    signals: dict[str, SignalDict] = {}
    for name, (raw, detail) in values.items():
        value = min(1.0, max(0.0, float(raw)))
        signals[name] = {
            "value": round(value, 4),
            "weight": round(weights[name] / total, 4),
            "contribution": round(value * weights[name] / total, 4),
            "detail": detail,
        }
    score = sum(s["value"] * weights[n] for n, s in signals.items()) / total
    return round(min(1.0, max(0.0, score)), 4), signals


def judge(agent: Agent, execution: Execution, digest: str) -> Judgement:
    """The agent's model scores the run (memory.model_calls: budgeted, counted).
    Precondition: outside any transaction."""
    snapshot = execution.config_snapshot or {}
    call = agent_model_call(
        agent=agent,
        messages=[Message.system(JUDGE_PROMPT), Message.user(f"The run:\n{digest}")],
        max_tokens=JUDGE_MAX_TOKENS,
        provider=str(snapshot.get("llm_provider") or ""),
        model=str(snapshot.get("llm_model") or ""),
        purpose="quality_judge",
    )
    if call.completion is None:
        return Judgement(None, f"skipped: {call.skipped}", call.error, call)
    data: Any = extraction._json_in(call.text)
    score = data.get("score") if isinstance(data, dict) else None
    if isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score <= 1:
        return Judgement(None, "skipped: not_json", call.text[:500], call)
    verdict = str(data.get("verdict") or ("good" if score >= 0.5 else "bad"))[:20]
    return Judgement(float(score), verdict, str(data.get("reason") or "")[:2000], call)


def judge_note(judgement: Judgement) -> dict[str, Any]:
    """What the judge cost, for the run's ``result`` (beside ``memory_extraction``)."""
    call = judgement.call
    note: dict[str, Any] = {"verdict": judgement.verdict}
    if call is not None:
        note |= {"model": call.model, "tokens": call.tokens, "cost_usd": str(call.cost)}
    return note
