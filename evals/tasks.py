"""Celery tasks of the evaluations: a run of an experiment scored once it ended or parked."""

from __future__ import annotations

from celery import shared_task

from core.tenancy import TenantTask
from evals.services.experiments import SCORE_TASK, experiment_result_score


@shared_task(name=SCORE_TASK, base=TenantTask, ignore_result=True)
def score_result(result_id: str) -> str:
    result = experiment_result_score(result_id=result_id)
    return result.status if result is not None else "gone"
