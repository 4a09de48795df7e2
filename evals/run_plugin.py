"""The experiments' run plugin (agents/runtime/plugins.py). A run of an experiment is marked by
its ``initial_context["evaluation"]`` (evals.services.experiments starts it so):

- ``setup``: the run continues the case's conversation instead of a real one, and joins none
  (no conversation key). It starts on the experiment's agent version: the experiment creates it
  on that version, which the kernel puts on the run's agent before the prompt is rendered
  (agents.runtime.setup.build_snapshot).
- each delivery: the case's recording is handed to the tool gate (evals/recordings.py).

A run without the mark costs nothing here: a dictionary lookup per delivery, no query."""

from __future__ import annotations

from typing import Self

from agents.runtime.plugins import RunPlugin, RunSetup, RunView
from core import tenancy
from evals import recordings
from evals.evaluation import mark_of
from evals.matching import index
from evals.models import TestCase
from evals.services.experiments import send_score


class EvaluationPlugin(RunPlugin):
    @classmethod
    def setup(cls, setup: RunSetup) -> None:
        mark = mark_of(setup.execution.initial_context)
        if mark is None:
            return
        case = TestCase.objects.only("conversation").get(pk=mark["case_id"])
        setup.conversation = list(case.conversation or [])
        setup.conversation_key = None

    @classmethod
    def for_run(cls, run: RunView) -> Self | None:
        mark = mark_of(run.execution.initial_context)
        if mark is None:
            return None
        with tenancy.agency_context(run.execution.agency_id):
            calls = TestCase.objects.values_list("recorded_calls", flat=True).get(
                pk=mark["case_id"]
            )
        recordings.put(run.execution.id, index(calls or []))
        return cls(run)

    def parked(self, status: str) -> None:
        """A run that parks (a self-correction question, a wait) is scored as it stands: a
        case may expect it to (``final_status``); scored again if it ends later."""
        execution = self.run.execution
        recordings.drop(execution.id)  # the next delivery puts it back
        mark = mark_of(execution.initial_context)
        if mark is not None:
            send_score(str(mark["result_id"]), agency_id=execution.agency_id)
