"""The experiments' run plugin (agents/runtime/plugins.py). A run of an experiment is marked by
its ``initial_context["evaluation"]`` (evals.services.experiments starts it so):

- ``setup``: the run continues the case's conversation instead of a real one, and joins none
  (no conversation key). It starts on the experiment's agent version: the experiment creates it
  on that version, which the kernel puts on the run's agent before the prompt is rendered
  (agents.runtime.setup.build_snapshot).
  An experiment of an unsaved draft (``draft_config``, mark ``draft``) puts the draft's
  configuration on the run's agent, in memory, as the kernel does a version's, and offers the
  tools the draft's patterns allow; a later delivery of the run puts it back on the agent.
- each delivery: the case's recording is handed to the tool gate (evals/recordings.py).

A run without the mark costs nothing here: a dictionary lookup per delivery, no query."""

from __future__ import annotations

from typing import Any, Self

from agents.models import Agent
from agents.runtime.plugins import RunPlugin, RunSetup, RunView
from agents.runtime.setup import usable_tools
from agents.services.versions import config_fields
from core import tenancy
from evals import recordings
from evals.evaluation import mark_of
from evals.matching import index
from evals.models import Experiment, TestCase
from evals.services.experiments import send_score


def _put_draft(agent: Agent, mark: dict[str, Any]) -> None:
    """The draft's configuration on ``agent``, in memory only (never saved)."""
    config = Experiment.objects.values_list("draft_config", flat=True).get(pk=mark["experiment_id"])
    for name, value in config_fields(config or {}).items():
        setattr(agent, name, value)


class EvaluationPlugin(RunPlugin):
    @classmethod
    def setup(cls, setup: RunSetup) -> None:
        mark = mark_of(setup.execution.initial_context)
        if mark is None:
            return
        case = TestCase.objects.only("conversation").get(pk=mark["case_id"])
        setup.conversation = list(case.conversation or [])
        setup.conversation_key = None
        if mark.get("draft"):
            _put_draft(setup.agent, mark)
            setup.tools = usable_tools(setup.agent)

    @classmethod
    def for_run(cls, run: RunView) -> Self | None:
        mark = mark_of(run.execution.initial_context)
        if mark is None:
            return None
        with tenancy.agency_context(run.execution.agency_id):
            calls = TestCase.objects.values_list("recorded_calls", flat=True).get(
                pk=mark["case_id"]
            )
            if mark.get("draft") and not run.first_claim:  # (setup put it on the first)
                _put_draft(run.agent, mark)
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
