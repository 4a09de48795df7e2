"""Teams' run-ended listener (AGENTDESK_RUN_ENDED_LISTENERS, agents/lifecycle/listeners.py)."""

from __future__ import annotations

from agents.lifecycle import RunEnded
from agents.models import ExecutionStatus, TriggerType
from teams.services import ending


def delegation_ended(ended: RunEnded) -> None:
    """Teams (issue 19): a delegated run's end resumes the run that waits for it, with its
    result; a run that ends otherwise than completed cancels the runs it delegated to."""
    execution = ended.execution
    delegated = execution.trigger_type == TriggerType.AGENT
    if not delegated and execution.status == ExecutionStatus.COMPLETED:
        return  # the common case: no query
    ending.run_ended(execution)
