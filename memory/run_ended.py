"""Memory's run-ended listener (AGENTDESK_RUN_ENDED_LISTENERS, agents/lifecycle/listeners.py)."""

from __future__ import annotations

from agents.lifecycle import RunEnded
from memory.episodes import episode_record


def record_episode(ended: RunEnded) -> None:
    """The run's episode, in the ending transaction; ``memory.after_run`` (after-run work)
    completes it once that commits. None for an evaluation run (an experiment's): the agent did
    not do it, and its tool replies were recorded ones."""
    if ended.execution.is_evaluation:
        return
    episode_record(ended.execution)
