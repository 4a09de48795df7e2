"""Runs for the memory tests: started and run in the test's thread (no worker in between), and
their episodes completed as ``memory.after_run`` completes them."""

from __future__ import annotations

import time
from typing import Any

from agents import lifecycle
from agents.models import Agent, Execution, ExecutionStatus
from agents.runtime.loop import run_execution
from core import tenancy
from memory.episodes import DONE_KEY, episode_complete
from memory.models import Episode


def run_to_end(agent: Agent, text: str, **fields: Any) -> Execution:
    """A manual run of ``agent`` with input ``text``, run to its end here."""
    with tenancy.agency_context(agent.agency_id):
        execution = Execution.objects.create(
            agency_id=agent.agency_id, agent=agent, site_id=agent.site_id,
            trigger_type="manual", input=text, **fields,
        )  # fmt: skip
        lifecycle.record_transition(execution, ExecutionStatus.PENDING, reason="test", created=True)
        execution.save()
    run_execution(execution.id, agency_id=agent.agency_id)
    with tenancy.agency_context(agent.agency_id):
        return Execution.objects.get(pk=execution.pk)


def complete_episode(execution: Execution, timeout: float = 60) -> Episode:
    """What ``memory.after_run`` does once the run committed; if a worker of the session took
    the task first, its work is waited for instead."""
    if episode_complete(execution.id, agency_id=execution.agency_id) == "in progress":
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with tenancy.agency_context(execution.agency_id):
                done = Execution.objects.filter(pk=execution.id, result__has_key=DONE_KEY)
                if done.exists():
                    break
            time.sleep(0.1)
    with tenancy.agency_context(execution.agency_id):
        return Episode.objects.get(execution_id=execution.id)
