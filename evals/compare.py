"""Experiments side by side (issue 28's results page, and its API): per experiment the figures
(pass rate, cost per case, p50/p95 latency, mean steps and tokens, the judge's mean score) with
the better one marked; per case what each version did (pass or fail, the checks it failed, the
tools it called and what it answered, its run); and the dataset's experiments over time.

Reads only. Precondition: ``experiments`` already scoped to the caller's agency (the admin's
queryset, the API's ``scope``); the rows read with them are the same agency's."""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db.models import QuerySet

from agents.models import Execution
from core.exceptions import ApplicationError
from evals.models import (
    Experiment,
    ExperimentKind,
    ExperimentResult,
    ExperimentStatus,
    ResultStatus,
)
from tools.models import ToolCall

MAX_COMPARED = 6
TREND_SHOWN = 30
_ARGUMENTS_SHOWN = 80

# figure -> True when higher is better (the judge and the pass rate), False when lower is.
HIGHER_IS_BETTER = {
    "pass_rate": True,
    "cost_per_case_usd": False,
    "latency_p50_ms": False,
    "latency_p95_ms": False,
    "steps_mean": False,
    "tokens_mean": False,
    "judge_score_mean": True,
    "loops_flagged": False,
}


@dataclass(frozen=True)
class Figures:
    """One experiment's figures over its cases that ended (a running experiment's so far)."""

    experiment: Experiment
    label: str  # "Version 3", "Draft of version 3"
    cases_done: int
    pass_rate: float
    cost_per_case_usd: Decimal | None
    latency_p50_ms: int | None
    latency_p95_ms: int | None
    steps_mean: float | None
    tokens_mean: float | None
    judge_score_mean: float | None
    loops_flagged: int  # loops caught in its runs, all cases together
    best: frozenset[str] = field(default_factory=frozenset)  # the figures it is best at


@dataclass(frozen=True)
class Call:
    tool: str
    arguments: str  # compact JSON, cut short
    status: str


@dataclass(frozen=True)
class CaseOutcome:
    """What one version did on one case (``None`` in a row: that experiment has no such case)."""

    status: str
    failed_checks: list[dict[str, Any]]
    calls: list[Call]
    output: str
    execution_id: uuid.UUID | None
    judge_score: float | None


@dataclass(frozen=True)
class CaseRow:
    key: uuid.UUID
    name: str
    outcomes: list[CaseOutcome | None]  # one per compared experiment, in their order
    differs: bool  # the versions did not all pass or all fail


@dataclass(frozen=True)
class Comparison:
    figures: list[Figures]
    cases: list[CaseRow]
    trend: list[Figures]  # the dataset's experiments on these agents, oldest first


def percentile(values: Sequence[int], share: float) -> int | None:
    """The nearest-rank percentile (``share`` 0.5: the median), ``None`` of no value."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(math.ceil(share * len(ordered)) - 1, 0)]


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def label(experiment: Experiment) -> str:
    number = experiment.agent_version.number if experiment.agent_version else None
    if experiment.kind == ExperimentKind.DRAFT:
        return f"Draft of version {number}" if number else "Draft"
    return f"Version {number}" if number else "Version (deleted)"


def figures(experiment: Experiment, results: Sequence[ExperimentResult]) -> Figures:
    done = [r for r in results if r.status != ResultStatus.RUNNING]
    ran = [r for r in done if r.status != ResultStatus.NOT_STARTED]
    latencies = [r.latency_ms for r in ran if r.latency_ms is not None]
    scores = [r.judge_score for r in done if r.judge_score is not None]
    passed = sum(r.status == ResultStatus.PASSED for r in done)
    cost = sum((r.cost_usd for r in ran), Decimal(0))
    return Figures(
        experiment=experiment,
        label=label(experiment),
        cases_done=len(done),
        pass_rate=passed / len(done) if done else 0.0,
        cost_per_case_usd=(cost / len(ran)).quantize(Decimal("0.000001")) if ran else None,
        latency_p50_ms=percentile(latencies, 0.5),
        latency_p95_ms=percentile(latencies, 0.95),
        steps_mean=_mean([r.steps for r in ran]),
        tokens_mean=_mean([r.tokens_total for r in ran]),
        judge_score_mean=_mean(scores),
        loops_flagged=sum(r.loops_flagged for r in ran),
    )


def _mark_best(all_figures: list[Figures]) -> list[Figures]:
    """Each figure's best value marked on the experiments that have it, when they differ."""
    best: dict[int, set[str]] = {i: set() for i in range(len(all_figures))}
    for name, higher in HIGHER_IS_BETTER.items():
        values = {i: getattr(f, name) for i, f in enumerate(all_figures)}
        known = {i: v for i, v in values.items() if v is not None}
        if len(known) < 2 or len(set(known.values())) == 1:
            continue
        top = max(known.values()) if higher else min(known.values())
        for i, value in known.items():
            if value == top:
                best[i].add(name)
    return [
        Figures(**{**f.__dict__, "best": frozenset(best[i])}) for i, f in enumerate(all_figures)
    ]


def _calls(execution_ids: list[uuid.UUID]) -> dict[uuid.UUID, list[Call]]:
    found: dict[uuid.UUID, list[Call]] = {}
    rows = ToolCall.objects.filter(execution_id__in=execution_ids).order_by("created_at")
    for execution_id, tool, arguments, status in rows.values_list(
        "execution_id", "tool_name", "input", "status"
    ):
        text = json.dumps(arguments, ensure_ascii=False, sort_keys=True, separators=(", ", ": "))
        if len(text) > _ARGUMENTS_SHOWN:
            text = text[: _ARGUMENTS_SHOWN - 1] + "…"
        found.setdefault(execution_id, []).append(Call(tool, text, status))
    return found


def _case_rows(
    experiments: list[Experiment], results: dict[uuid.UUID, list[ExperimentResult]]
) -> list[CaseRow]:
    ran = [r.execution_id for rs in results.values() for r in rs if r.execution_id]
    calls = _calls(ran)
    outputs = dict(Execution.objects.filter(pk__in=ran).values_list("pk", "output"))
    names: dict[uuid.UUID, str] = {}
    by_key: dict[uuid.UUID, dict[uuid.UUID, ExperimentResult]] = {}
    for experiment in experiments:
        for result in results[experiment.pk]:
            names.setdefault(result.case.key, result.case.name)
            by_key.setdefault(result.case.key, {})[experiment.pk] = result
    rows = []
    for key, found in by_key.items():
        outcomes: list[CaseOutcome | None] = []
        for experiment in experiments:
            shown = found.get(experiment.pk)
            if shown is None:
                outcomes.append(None)
                continue
            run = shown.execution_id
            outcomes.append(
                CaseOutcome(
                    status=shown.status,
                    failed_checks=[c for c in shown.checks if not c.get("passed")],
                    calls=calls.get(run, []) if run else [],
                    output=outputs.get(run, "") if run else "",
                    execution_id=run,
                    judge_score=shown.judge_score,
                )
            )
        statuses = {o.status for o in outcomes if o is not None}
        rows.append(CaseRow(key, names[key], outcomes, len(statuses) > 1 or None in outcomes))
    return rows


def _results(experiment_ids: list[uuid.UUID]) -> dict[uuid.UUID, list[ExperimentResult]]:
    grouped: dict[uuid.UUID, list[ExperimentResult]] = {pk: [] for pk in experiment_ids}
    rows = (
        ExperimentResult.objects.filter(experiment_id__in=experiment_ids)
        .select_related("case")
        .order_by("case__position")
    )
    for result in rows:
        grouped[result.experiment_id].append(result)
    return grouped


def trend(
    experiments: QuerySet[Experiment], *, dataset_id: uuid.UUID, agent_ids: set[Any]
) -> list[Figures]:
    """The dataset's completed experiments of these agents, the last ``TREND_SHOWN``, oldest
    first."""
    shown = list(
        experiments.filter(
            dataset_version__dataset_id=dataset_id,
            agent_id__in=agent_ids,
            status=ExperimentStatus.COMPLETED,
        )
        .select_related("agent_version")
        .order_by("-created_at")[:TREND_SHOWN]
    )[::-1]
    results = _results([e.pk for e in shown])
    return [figures(e, results[e.pk]) for e in shown]


def compare(experiments: QuerySet[Experiment], ids: Sequence[uuid.UUID]) -> Comparison:
    """``ids``' experiments side by side, in the order given; 422 unless 2 to ``MAX_COMPARED``
    different experiments of one dataset, 404 when one is not found (in the caller's scope)."""
    unique = list(dict.fromkeys(ids))
    if not 2 <= len(unique) <= MAX_COMPARED:
        raise ApplicationError(
            "invalid_comparison",
            f"Compare 2 to {MAX_COMPARED} different experiments.",
            status=422,
        )
    found = {
        e.pk: e
        for e in experiments.filter(pk__in=unique).select_related(
            "agent", "agent_version", "dataset_version__dataset"
        )
    }
    if len(found) != len(unique):
        raise ApplicationError("not_found", "No such experiment.", status=404)
    chosen = [found[pk] for pk in unique]
    datasets = {e.dataset_version.dataset_id for e in chosen}
    if len(datasets) != 1:
        raise ApplicationError(
            "invalid_comparison", "Compare experiments of one dataset.", status=422
        )
    results = _results(unique)
    compared = _mark_best([figures(e, results[e.pk]) for e in chosen])
    return Comparison(
        figures=compared,
        cases=_case_rows(chosen, results),
        trend=trend(experiments, dataset_id=datasets.pop(), agent_ids={e.agent_id for e in chosen}),
    )


def latest_per_version(
    experiments: QuerySet[Experiment], *, dataset_id: uuid.UUID
) -> list[uuid.UUID]:
    """The dataset's last completed experiment of each agent version, the newest
    ``MAX_COMPARED`` of them (what "Compare versions" on a dataset's page shows)."""
    picked: dict[tuple[Any, Any, str], uuid.UUID] = {}
    rows = experiments.filter(
        dataset_version__dataset_id=dataset_id, status=ExperimentStatus.COMPLETED
    ).order_by("-created_at")
    for pk, agent, version, kind in rows.values_list("pk", "agent_id", "agent_version_id", "kind"):
        if kind == ExperimentKind.DRAFT:
            picked.setdefault((agent, pk, kind), pk)  # each draft is its own configuration
        else:
            picked.setdefault((agent, version, kind), pk)
        if len(picked) == MAX_COMPARED:
            break
    return list(picked.values())[::-1]
