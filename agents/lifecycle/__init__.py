"""The execution's lifecycle, below the runtime (docs/decisions/0010-run-lifecycle.md): the run's
state machine and everything a change of state writes or sends. It owns transitions (checked
against :mod:`~agents.lifecycle.states`), the end of a run (summary, agent stats, usage,
after-run work, the ``ai.execution.*`` event), the live broadcast and its payloads
(:mod:`~agents.lifecycle.protocol`), and calls the run-ended listeners the settings name
(:mod:`~agents.lifecycle.listeners`) inside the ending transaction.

The runtime ends and parks runs through it; so do the features (approvals, flow, teams, ...)
and the execution services, never through the runtime's store. It imports neither the runtime
nor a feature app (an import-linter contract in pyproject.toml).
"""

from agents.lifecycle.budget import release_budget_reservation
from agents.lifecycle.finish import finish_execution
from agents.lifecycle.listeners import RunEnded
from agents.lifecycle.transitions import INT4_MAX, record_transition

__all__ = [
    "INT4_MAX",
    "RunEnded",
    "finish_execution",
    "record_transition",
    "release_budget_reservation",
]
