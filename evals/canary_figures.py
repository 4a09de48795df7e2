"""A canary's live figures: both arms (stable and candidate) from the agent's runs since the
canary started, by the version each run started on (``Execution.agent_version``), evaluation
runs left out. Three aggregate queries, whatever the number of runs.

Per arm: ``runs`` (started), ``ended``, ``failed`` (ended failed or timed out) and
``failure_rate`` (of the ended), ``cost_per_run`` and ``steps`` (model calls; means over the
ended, with their sample variances ``cost_var``, ``steps_var`` for the rule), ``loop_stuck_rate``
(ended runs flow analysis flagged looping or stuck), ``quality`` (mean quality score of the
scored runs, or None) and ``denial_rate`` (denied of the decided approvals, or None)."""

from __future__ import annotations

from typing import Any

from django.db.models import Avg, Count, Exists, FloatField, OuterRef, Q, Variance
from django.db.models.functions import Cast

from agents.models import TERMINAL_STATUSES, Execution, ExecutionPurpose, ExecutionStatus
from approvals.models import Approval, ApprovalStatus
from evals.models import Canary
from flow.models import LoopDetection, StuckRun
from memory.models import RunQuality

FAILED = (ExecutionStatus.FAILED, ExecutionStatus.TIMED_OUT)
ARMS = ("stable", "candidate")


def _runs(canary: Canary) -> Any:
    return Execution.objects.filter(
        agent_id=canary.agent_id,
        purpose=ExecutionPurpose.RUN,
        created_at__gte=canary.created_at,
        agent_version_id__in=[canary.stable_id, canary.candidate_id],
    )


def _rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def canary_figures(canary: Canary) -> dict[str, dict[str, Any]]:
    """``{"stable": {...}, "candidate": {...}}``. Precondition: the canary's agency context."""
    ended = Q(status__in=TERMINAL_STATUSES)
    flagged = Exists(LoopDetection.objects.filter(execution_id=OuterRef("pk"))) | Exists(
        StuckRun.objects.filter(execution_id=OuterRef("pk"))
    )
    rows = (
        _runs(canary)
        .annotate(flagged=flagged, cost=Cast("cost_usd", FloatField()))
        .values("agent_version_id")
        .annotate(
            runs=Count("id"),
            ended=Count("id", filter=ended),
            failed=Count("id", filter=Q(status__in=FAILED)),
            looped=Count("id", filter=ended & Q(flagged=True)),
            cost_per_run=Avg("cost", filter=ended),
            cost_var=Variance("cost", filter=ended, sample=True),
            steps=Avg(Cast("llm_call_count", FloatField()), filter=ended),
            steps_var=Variance(Cast("llm_call_count", FloatField()), filter=ended, sample=True),
        )
    )
    quality = dict(
        RunQuality.objects.filter(execution__in=_runs(canary))
        .values("execution__agent_version_id")
        .annotate(mean=Avg("score"))
        .values_list("execution__agent_version_id", "mean")
    )
    approvals: dict[Any, dict[str, Any]] = {
        row["execution__agent_version_id"]: dict(row)
        for row in Approval.objects.filter(
            execution__in=_runs(canary),
            status__in=(ApprovalStatus.APPROVED, ApprovalStatus.DENIED),
        )
        .values("execution__agent_version_id")
        .annotate(decided=Count("id"), denied=Count("id", filter=Q(status=ApprovalStatus.DENIED)))
    }
    by_version = {row["agent_version_id"]: row for row in rows}
    figures: dict[str, dict[str, Any]] = {}
    for arm, version_id in zip(ARMS, (canary.stable_id, canary.candidate_id), strict=True):
        row = by_version.get(version_id, {})
        done = int(row.get("ended", 0))
        decided = approvals.get(version_id, {})
        figures[arm] = {
            "runs": int(row.get("runs", 0)),
            "ended": done,
            "failed": int(row.get("failed", 0)),
            "failure_rate": _rate(int(row.get("failed", 0)), done),
            "cost_per_run": row.get("cost_per_run"),
            "cost_var": row.get("cost_var") or 0.0,
            "steps": row.get("steps"),
            "steps_var": row.get("steps_var") or 0.0,
            "loop_stuck_rate": _rate(int(row.get("looped", 0)), done),
            "quality": quality.get(version_id),
            "denial_rate": _rate(int(decided.get("denied", 0)), int(decided.get("decided", 0))),
        }
    return figures


# What the pages show, in order: (key, label, how it reads).
SHOWN = (
    ("runs", "Runs", "count"),
    ("failure_rate", "Failure rate", "percent"),
    ("cost_per_run", "Cost per run", "usd"),
    ("steps", "Steps per run", "number"),
    ("loop_stuck_rate", "Loop or stuck rate", "percent"),
    ("quality", "Quality score", "percent"),
    ("denial_rate", "Approval denial rate", "percent"),
)


def shown(value: Any, kind: str) -> str:
    """A figure in words ("-" when there is none yet)."""
    if value is None:
        return "-"
    if kind == "count":
        return str(value)
    if kind == "percent":
        return f"{float(value):.0%}"
    if kind == "usd":
        return f"${float(value):.4f}"
    return f"{float(value):.1f}"


def figure_rows(figures: dict[str, dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(label, stable, candidate) per figure shown."""
    return [
        (label, shown(figures["stable"].get(key), kind), shown(figures["candidate"].get(key), kind))
        for key, label, kind in SHOWN
    ]
