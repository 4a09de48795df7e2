"""Canary versions in the run's life (agents/runtime/plugins.py, agents/lifecycle/listeners.py):

- ``version`` (a run's first claim, created on no chosen version): the agent's running canary,
  if any, names the arm of the run (evals/canary_rule.py's hash of the run's conversation key,
  else its id). One cache read per run, no query (evals.services.canaries.canary_routing).
- :func:`canary_run_ended` (a run ending, in its transaction): a run of either arm sends the
  canary's evaluation, which runs on a worker once the end commits (evals.tasks)."""

from __future__ import annotations

import uuid

from agents.lifecycle.listeners import RunEnded
from agents.models import Execution, ExecutionPurpose
from agents.runtime.plugins import RunPlugin
from evals.canary_rule import on_candidate
from evals.services.canaries import canary_routing, send_evaluate
from memory.conversations import conversation_key


def routing_key(execution: Execution) -> str:
    """Whom the run is for: its conversation (session, contact, the person who started it),
    else the run itself."""
    key = conversation_key(execution)
    return f"{key.context_type}:{key.context_id}" if key is not None else str(execution.pk)


class CanaryPlugin(RunPlugin):
    @classmethod
    def version(cls, execution: Execution) -> uuid.UUID | None:
        if execution.purpose != ExecutionPurpose.RUN:
            return None
        routing = canary_routing(execution.agent_id)
        if routing is None:
            return None
        if on_candidate(routing.canary_id, routing_key(execution), routing.share):
            return routing.candidate_id
        return routing.stable_id


def canary_run_ended(ended: RunEnded) -> None:
    execution = ended.execution
    if execution.purpose != ExecutionPurpose.RUN or execution.agent_version_id is None:
        return
    routing = canary_routing(execution.agent_id)
    if routing is not None and execution.agent_version_id in (
        routing.stable_id,
        routing.candidate_id,
    ):
        send_evaluate(routing.canary_id, agency_id=execution.agency_id)
