"""Celery tasks of the evaluations: a run of an experiment scored once it ended or parked, and
its rubric judged (evals/judge.py), a deploy gate's experiment decided once it completed."""

from __future__ import annotations

from celery import shared_task

from core.tenancy import TenantTask
from evals import judge
from evals.services.canaries import EVALUATE_TASK, canary_evaluate
from evals.services.experiments import (
    GATE_TASK,
    JUDGE_TASK,
    SCORE_TASK,
    experiment_result_score,
)
from evals.services.gate import gate_experiment_decide


@shared_task(name=SCORE_TASK, base=TenantTask, ignore_result=True)
def score_result(result_id: str) -> str:
    result = experiment_result_score(result_id=result_id)
    return result.status if result is not None else "gone"


@shared_task(name=JUDGE_TASK, ignore_result=True)
def judge_result(result_id: str, *, agency_id: str) -> str:
    """A scored case's rubric judged (evals/judge.py). Not a TenantTask: that holds one
    transaction for the whole task, and the judge's model call must hold none."""
    return judge.judge_result(result_id=result_id, agency_id=agency_id)


@shared_task(name=GATE_TASK, base=TenantTask, ignore_result=True)
def gate_decide(experiment_id: str) -> str:
    """A deploy gate's experiment completed: its version made current if it passed."""
    return "activated" if gate_experiment_decide(experiment_id=experiment_id) else "held"


@shared_task(name=EVALUATE_TASK, base=TenantTask, ignore_result=True)
def canary_evaluate_task(canary_id: str) -> str:
    """A canary's rule applied once a run of either arm ended (evals/canary_plugin.py)."""
    return canary_evaluate(canary_id=canary_id)
