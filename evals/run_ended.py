"""The experiments' run-ended listener (agents/lifecycle/listeners.py): an experiment's run that
ends is scored once its end commits (evals.tasks.score_result). Any other run: a dictionary
lookup, no query."""

from __future__ import annotations

from agents.lifecycle.listeners import RunEnded
from evals import recordings
from evals.evaluation import mark_of
from evals.services.experiments import send_score


def experiment_run_ended(ended: RunEnded) -> None:
    execution = ended.execution
    mark = mark_of(execution.initial_context)
    if mark is None:
        return
    recordings.drop(execution.id)
    send_score(str(mark["result_id"]), agency_id=execution.agency_id)
