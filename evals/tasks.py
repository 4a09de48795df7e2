"""Celery tasks of the evaluations: a run of an experiment scored once it ended or parked, and
its rubric judged (evals/judge.py)."""

from __future__ import annotations

from celery import shared_task

from core.tenancy import TenantTask
from evals import judge
from evals.services.experiments import JUDGE_TASK, SCORE_TASK, experiment_result_score


@shared_task(name=SCORE_TASK, base=TenantTask, ignore_result=True)
def score_result(result_id: str) -> str:
    result = experiment_result_score(result_id=result_id)
    return result.status if result is not None else "gone"


@shared_task(name=JUDGE_TASK, ignore_result=True)
def judge_result(result_id: str, *, agency_id: str) -> str:
    """A scored case's rubric judged (evals/judge.py). Not a TenantTask: that holds one
    transaction for the whole task, and the judge's model call must hold none."""
    return judge.judge_result(result_id=result_id, agency_id=agency_id)
