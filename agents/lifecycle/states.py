"""The execution state machine (DESIGN.md): which status may follow which (the lifecycle
checks every transition against it)."""

from __future__ import annotations

from agents.models import ExecutionStatus as S

ALLOWED: dict[str, frozenset[str]] = {
    S.PENDING: frozenset({S.RUNNING, S.CANCELLED, S.FAILED}),
    # running -> running: another delivery resumed the run after its worker died.
    # running -> pending: a draining worker handed the run back for another one
    # (agents/runtime/drain.py).
    S.RUNNING: frozenset(
        {
            S.PENDING,
            S.RUNNING,
            S.WAITING_APPROVAL,
            S.WAITING_INPUT,
            S.WAITING_AGENT,
            S.COMPLETED,
            S.FAILED,
            S.CANCELLED,
            S.TIMED_OUT,
        }
    ),
    # A decision, an answer or a timer makes a waiting run pending again (a worker resumes it).
    S.WAITING_APPROVAL: frozenset({S.PENDING, S.CANCELLED, S.FAILED, S.TIMED_OUT}),
    S.WAITING_INPUT: frozenset({S.PENDING, S.CANCELLED, S.FAILED, S.TIMED_OUT}),
    # A delegating run waits, holding no worker, until its child agent's run ends (flow of
    # delegate_to_agent, issue 19).
    S.WAITING_AGENT: frozenset({S.PENDING, S.CANCELLED, S.FAILED, S.TIMED_OUT}),
}


def can_transition(from_status: str, to_status: str) -> bool:
    return to_status in ALLOWED.get(from_status, frozenset())


# What a run parked by an LLM provider's own limit waits for (``Execution.input_request["kind"]``,
# agents/runtime/provider_limits.py): the window's end, after which it resumes with no
# observation (agents.services.resume.execution_resume_due).
PROVIDER_RATE_LIMIT_WAIT = "provider_rate_limit"
