"""The end of a run: its transition, summary, agent stats, usage, after-run work, the run-ended
listeners and the ``ai.execution.*`` event, all in the transaction that ends it."""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.utils import timezone

from agents import after_run
from agents.lifecycle.budget import release_budget_reservation
from agents.lifecycle.listeners import RunEnded, run_ended
from agents.lifecycle.transitions import INT4_MAX, RowWriter, record_transition
from agents.llm import Usage
from agents.models import Execution, ExecutionStatus, TransitionType
from core.events import emitted_by_run, event_emit
from core.models import ActorType
from ops import metrics
from usage.models import UsagePurpose
from usage.services import usage_record_llm_call


def finish_execution(
    execution: Execution,
    *,
    status: str,
    stop_reason: str,
    output: str = "",
    error: str = "",
    error_details: dict[str, Any] | None = None,
    tx: RowWriter | None = None,
    by_worker: bool = False,
) -> None:
    """End a run: status and summary on the row (the caller writes it: ``tx``'s statement, or
    its own save), transition, agent stats and the after-run work it is owed (neither for an
    evaluation run), usage, the run-ended listeners (in their order) and the ``ai.execution.*``
    event, all in the caller's transaction. ``by_worker``: the run's own worker ends it in one
    of its steps (see :class:`RunEnded`)."""
    now = timezone.now()
    from_status = execution.status
    record_transition(
        execution,
        status,
        reason=error or stop_reason,
        transition_type=TransitionType.NORMAL
        if status == ExecutionStatus.COMPLETED
        else TransitionType.ERROR,
        triggered_by=stop_reason,
        tx=tx,
    )
    execution.stop_reason = stop_reason
    execution.output = output
    execution.error = error
    execution.error_details = error_details
    execution.completed_at = now
    started = execution.started_at or execution.created_at
    execution.duration_ms = min(INT4_MAX, max(0, int((now - started).total_seconds() * 1000)))
    execution.lease_owner = ""
    execution.wait_until = None
    release_budget_reservation(execution)
    # An evaluation run (an experiment's: ExecutionPurpose) is no run of the agent's work: its
    # stats leave it out, and nothing is learned from it (its tool replies were recorded ones).
    if not execution.is_evaluation:
        _update_agent_stats(execution)
        after_run.record(execution)  # sent once this commits, and again until it is done
    _record_usage(execution)
    # The features' part (the memory episode, a delegation's end, decisions still pending):
    # after usage, whose row lock the end of a delegated run's children takes next.
    run_ended(RunEnded(execution, from_status, by_worker))
    metrics.run_finished(execution)  # counted once this commits
    # Seed 004's two end events (DESIGN.md: "ai.execution.completed / failed"): a run that did
    # not complete — failed, timed out, cancelled — is "failed"; status and stop_reason tell
    # which. actions_taken and tokens_used are the seed's payload names.
    succeeded = status == ExecutionStatus.COMPLETED
    # Whoever ends it (a cancel, say); an evaluation run's events are recorded and start no agent.
    with emitted_by_run(execution.id, execution.depth, dispatch=not execution.is_evaluation):
        _emit_ended(execution, status=status, stop_reason=stop_reason, succeeded=succeeded)


def _emit_ended(execution: Execution, *, status: str, stop_reason: str, succeeded: bool) -> None:
    output, error = execution.output, execution.error
    event_emit(
        agency_id=execution.agency_id,
        site_id=execution.site_id,
        event_type="ai.execution.completed" if succeeded else "ai.execution.failed",
        payload={
            "execution_id": str(execution.id),
            "agent_id": str(execution.agent_id),
            "actions_taken": execution.tool_call_count,
            "tokens_used": execution.tokens_total,
            "status": status,
            "stop_reason": stop_reason,
            "output": output[:2000],
            "error": error[:2000],
            "tokens_total": execution.tokens_total,
            "cost_usd": str(execution.cost_usd),
            "duration_ms": execution.duration_ms,
        },
        source_module="agents",
        source_entity_type="execution",
        source_entity_id=str(execution.id),
        actor_type=ActorType.AGENT,
        actor_id=str(execution.agent_id),
    )


# Seed 004's trigger_update_agent_stats fires only
#     WHEN (OLD.status = 'running' AND NEW.status IN ('completed', 'failed'))
# and its update_agent_stats() counts
#     failed_runs = failed_runs + CASE WHEN NEW.status = 'failed' THEN 1 ELSE 0 END,
#     last_error = CASE WHEN NEW.status = 'failed' THEN NEW.error ELSE last_error END,
# So a run counts in the stats when it ends completed or failed; a cancelled run (a human
# stopped it, or denied its action) and a timed-out one leave them as they were: no run, no
# failure, and last_error keeps the last real failure. (The seed's OLD.status = 'running' only
# makes the trigger fire once per run; our finish runs once per run, whatever state it ends from.)
_COUNTED_STATUSES = frozenset({ExecutionStatus.COMPLETED, ExecutionStatus.FAILED})


def _update_agent_stats(execution: Execution) -> None:
    """Seed 004's update_agent_stats (rule above), as one UPDATE."""
    if execution.status not in _COUNTED_STATUSES:
        return
    failed = execution.status == ExecutionStatus.FAILED
    with connection.cursor() as cursor:
        cursor.execute(
            _AGENT_STATS_SQL,
            {
                "agent": execution.agent_id,
                "succeeded": int(not failed),
                "failed": int(failed),
                "tokens": execution.tokens_total,
                "cost": execution.cost_usd,
                "actions": execution.tool_call_count,
                "duration": execution.duration_ms or 0,
                "finished": execution.completed_at,
                "error": execution.error[:2000] if failed else None,
            },
        )


# Written out once instead of compiled from F() expressions at the end of every run.
# The average is the exact mean, rounded: the sum of response times (bigint) over the runs,
# divided in numeric. (Updated in place in int4 it overflowed at avg x runs > 2^31, failing every
# later finish, and truncated at each run, drifting far below the mean.) In SET, columns on the
# right are the row's values before the update.
_AGENT_STATS_SQL = """
UPDATE agents_agent SET
    total_runs = total_runs + 1,
    successful_runs = successful_runs + %(succeeded)s,
    failed_runs = failed_runs + %(failed)s,
    total_tokens_used = total_tokens_used + %(tokens)s,
    total_cost_usd = total_cost_usd + %(cost)s,
    total_actions_taken = total_actions_taken + %(actions)s,
    total_response_time_ms = total_response_time_ms + %(duration)s,
    avg_response_time_ms = round(
        (total_response_time_ms + %(duration)s)::numeric / (total_runs + 1)
    ),
    last_run_at = %(finished)s,
    last_error = coalesce(%(error)s, last_error),
    updated_at = now()
WHERE id = %(agent)s
"""


def _record_usage(execution: Execution) -> None:
    """The run's model usage into today's usage row, once, when the run ends: the execution row
    carries the totals step by step, so a crash loses nothing and nothing is counted twice. An
    evaluation run's on rows of their own: real spend, but none of the agent's runs."""
    snapshot = execution.config_snapshot or {}
    usage_record_llm_call(
        agency_id=execution.agency_id,
        site_id=execution.site_id,
        agent_id=execution.agent_id,
        provider=str(snapshot.get("llm_provider", "")),
        model=str(snapshot.get("llm_model", "")),
        usage=Usage(
            input_tokens=execution.tokens_input,
            output_tokens=execution.tokens_output,
            cache_read_tokens=execution.tokens_cache_read,
            cache_write_tokens=execution.tokens_cache_write,
        ),
        cost=execution.cost_usd,
        runs=1,
        llm_calls=execution.llm_call_count,
        tool_calls=execution.tool_call_count,
        purpose=UsagePurpose.EVALUATION if execution.is_evaluation else UsagePurpose.RUN,
    )
