"""What a delegated run may do, decided once, when it is started, from the run that delegates
(its "parent"), and kept in the child's ``initial_context["delegation"]`` (it survives every
redelivery; the child's first claim narrows its snapshot with it, teams/runtime.py):

- tools: only those the parent was offered (the child's own patterns, intersected);
- limits: ``max_steps_per_run`` and ``max_tool_calls_per_step`` no more than the parent's,
  ``timeout_seconds`` no more than the parent's remaining running time;
- deadline: the parent's wait expires when its remaining time is up (the parent then times out
  and its children are cancelled), so the child never outlives the parent's deadline;
- budget: at most AGENTDESK_DELEGATION_BUDGET_SHARE of what the parent may still spend (its own
  share if it is a delegated run, and the agency's daily budget left); no cap when neither is
  set.

Also what a run and the runs it delegated to have cost so far, and the queue its team runs on.
"""

from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import connection

from agents.models import Agent, Execution, ExecutionStatus, StateTransition
from tools.handlers import ToolError
from usage.models import Budget, today

COST_QUANTUM = Decimal("0.000001")


def child_constraints(
    parent: Execution, target: Agent, *, now: datetime.datetime
) -> dict[str, Any]:
    snapshot = parent.config_snapshot or {}
    remaining = remaining_seconds(parent, now=now)
    if remaining < 1:
        raise ToolError("no_time_left", "This run has no time left to wait for another agent.")
    cap = _budget_share(parent)
    if cap is not None and cap <= 0:
        raise ToolError(
            "no_budget_left", "This run has no budget left to share with another agent."
        )
    timeout = min(target.timeout_seconds, int(remaining))
    return {
        "allowed_tools": sorted(t["name"] for t in snapshot.get("tools", [])),
        "max_steps_per_run": min(
            target.max_steps_per_run, int(snapshot.get("max_steps_per_run", 10**6))
        ),
        "max_tool_calls_per_step": min(
            target.max_tool_calls_per_step, int(snapshot.get("max_tool_calls_per_step", 10**6))
        ),
        "timeout_seconds": max(1, timeout),
        "deadline": (now + datetime.timedelta(seconds=remaining)).isoformat(),
        "max_cost_usd": None if cap is None else str(cap),
        "budget_share": settings.AGENTDESK_DELEGATION_BUDGET_SHARE,
    }


def remaining_seconds(execution: Execution, *, now: datetime.datetime) -> float:
    """What is left of the running run's ``timeout_seconds``: its time in ``running`` (the state
    it is in included, up to ``now``); time spent waiting does not count."""
    limit = float((execution.config_snapshot or {}).get("timeout_seconds", 0))
    used = 0.0
    for state, entered, exited in StateTransition.objects.filter(
        execution_id=execution.id
    ).values_list("to_state", "entered_at", "exited_at"):
        if state == ExecutionStatus.RUNNING:
            used += ((exited or now) - entered).total_seconds()
    return limit - used


def _budget_share(parent: Execution) -> Decimal | None:
    """The cap of a run the parent delegates to: a share of what the parent may still spend."""
    left: list[Decimal] = []
    own = ((parent.config_snapshot or {}).get("delegation") or {}).get("max_cost_usd")
    if own is not None:
        left.append(Decimal(own) - spent_by(parent))
    budget = Budget.objects.filter(agency_id=parent.agency_id).order_by("-date").first()
    if budget is not None:  # today's, or the latest limit today's row will be made from
        left.append(budget.remaining_usd if budget.date == today() else budget.limit_usd)
    if not left:
        return None
    share = Decimal(str(settings.AGENTDESK_DELEGATION_BUDGET_SHARE))
    return (max(Decimal(0), min(left)) * share).quantize(COST_QUANTUM)


_SUBTREE_COST_SQL = """
WITH RECURSIVE tree AS (
    SELECT id, cost_usd FROM agents_execution WHERE parent_id = %s AND trigger_type = 'agent'
    UNION ALL
    SELECT e.id, e.cost_usd FROM agents_execution e JOIN tree ON e.parent_id = tree.id
    WHERE e.trigger_type = 'agent'
)
SELECT coalesce(sum(cost_usd), 0) FROM tree
"""


def spent_by(execution: Execution) -> Decimal:
    """What the run and the runs it delegated to (all the way down) have cost so far.
    Precondition: its agency context."""
    return Decimal(execution.cost_usd) + delegated_cost(execution)


def delegated_cost(execution: Execution) -> Decimal:
    """What the runs ``execution`` delegated to (all the way down) have cost so far.
    Precondition: its agency context."""
    with connection.cursor() as cursor:
        cursor.execute(_SUBTREE_COST_SQL, [execution.id])
        row = cursor.fetchone()
    return Decimal(row[0] if row else 0)


def delivery_queue() -> str | None:
    """The queue of the Celery delivery running the calling run: its team runs there too (and
    it resumes there), so a worker pool given to a team keeps it. None outside a task."""
    from celery import current_task  # noqa: PLC0415

    request = getattr(current_task, "request", None)
    info = getattr(request, "delivery_info", None) or {}
    queue = info.get("routing_key")
    return str(queue) if queue else None
