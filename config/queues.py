"""The Celery queues, one per kind of work, and which task goes to which (README "Queues").

A backlog of one kind (embeddings after a burst of runs, e-mails to many approvers, a retention
purge) waits in its own queue and never delays a run's next step: a worker consumes the queues
it is given (``celery -A config worker -Q runs``), one deployment per queue in a cluster; a plain
``celery -A config worker`` (``manage.py up``, docker-compose) consumes all of them
(``CELERY_TASK_QUEUES``).

The routing is by task name, here and nowhere else (``CELERY_TASK_ROUTES`` names :func:`route`).
A sender that names a queue keeps it (a team's delegated runs go to the queue their lead ran on:
teams.services.limits.delivery_queue; tests give runs a queue of their own). A task not in
:data:`ROUTES` goes to :data:`DEFAULT`, ``runs``: the one queue every deployment consumes, so
nothing is stranded where no worker listens; a test fails until a new task is routed here.

Every message carries its send time in the :data:`SENT_AT` header (:func:`stamp_sent_at`, on
Celery's ``before_task_publish``), from which ``/metrics`` reads the age of each queue's oldest
waiting message: Celery's protocol 2 carries no timestamp, and Redis none of its own.
"""

from __future__ import annotations

import time
from typing import Any

RUNS = "runs"
TOOLS = "tools"
MEMORY = "memory"
NOTIFY = "notify"
HOUSEKEEPING = "housekeeping"
NAMES = (RUNS, TOOLS, MEMORY, NOTIFY, HOUSEKEEPING)
DEFAULT = RUNS

_QUEUE_TASKS: dict[str, tuple[str, ...]] = {
    # A run's next step, and what starts, wakes, resumes or ends runs: a run waits on these.
    RUNS: (
        "agents.run_execution",
        "agents.wake_execution",  # a parked run's timer
        "agents.dispatch_event",  # an event that starts the agents subscribed to it
        "agents.run_scheduled",  # an agent's cron tick (beat's database scheduler)
        "agents.reap_expired_leases",  # runs of lost workers, lost deliveries, due timers
        "teams.resume_parent",  # a delegated run ended: its lead goes on
        "teams.expire_wait",  # a lead's wait for its delegated run hit its deadline
        "teams.expire_waits",
        "approvals.expire_waiting",  # approvals and questions past expiry end or resume runs
    ),
    # Tool-heavy work outside a run's step: MCP servers' tools, evaluations (a judge's model
    # call, an experiment's scoring, a deploy gate's and a canary's verdicts).
    TOOLS: (
        "tools.refresh_mcp_servers",
        "evals.score_result",
        "evals.judge_result",
        "evals.gate_decide",
        "evals.canary_evaluate",
    ),
    # Embeddings, memory extraction after a run (a model call), consolidation.
    MEMORY: (
        "memory.after_run",
        "memory.embed_pending",
        "memory.consolidate_all",
    ),
    # E-mails and notifications to people.
    NOTIFY: (
        "approvals.notify_deciders",
        "flow.notify_stuck",
        "tools.deliver_stranded_emails",
        "webhooks.deliver",  # an outbound webhook's attempt (webhooks/outbound/)
        "webhooks.sweep_due_deliveries",
    ),
    # Periodic sweeps no run waits for: purges, analyses, stuck-run checks.
    HOUSEKEEPING: (
        "agents.purge_past_retention",
        "agents.purge_events_past_retention",
        "memory.purge_past_retention",
        "memory.purge_expired_conversations",
        "webhooks.purge_past_retention",
        "datasets.purge_past_retention",
        "audit.purge_past_retention",
        "core.purge_idempotency_records",
        "flow.detect_stuck_runs",
        "flow.analyse_finished_runs",
    ),
}
ROUTES: dict[str, str] = {task: queue for queue, tasks in _QUEUE_TASKS.items() for task in tasks}

# Each queue on a direct exchange of its name, as Celery declares a queue it creates itself.
CELERY_QUEUES = {name: {"exchange": name, "routing_key": name} for name in NAMES}

SENT_AT = "agentdesk_sent_at"


def route(
    name: str, args: Any, kwargs: Any, options: Any, task: Any = None, **_: Any
) -> dict[str, str] | None:
    """Celery's router (``CELERY_TASK_ROUTES``): the task's queue, or None for the default.
    A queue the sender named wins over this (Celery merges the sender's options last)."""
    queue = ROUTES.get(name)
    return {"queue": queue} if queue else None


def stamp_sent_at(headers: dict[str, Any] | None = None, **_: Any) -> None:
    """``before_task_publish``: the message's send time (Unix seconds). A retry is a new
    message, sent again: its wait starts then."""
    if headers is not None:
        headers[SENT_AT] = time.time()
