"""The platform's Prometheus metrics, recorded by every process (imported only when metrics are
on). Labels are bounded sets — agent types, statuses, providers, configured models, tool names,
error codes — never an execution, contact, user or agency id.

The scrape-time gauges (approvals and questions waiting, queue depth) are computed by
:mod:`ops.metrics.exposition` when /metrics is read, not recorded here.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from ops.metrics.multiprocess import configure

configure()  # before the first metric exists: its values go to this process's files

# Runs last from seconds to days (a run waiting for a person counts from its start to its end).
RUN_BUCKETS = (0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 1800, 3600, 14400, 86400)
STEP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
MODEL_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120)

RUNS_STARTED = Counter(
    "agentdesk_runs_started",
    "Runs claimed by a worker for the first time.",
    ["agent_type", "trigger"],
)
RUNS_FINISHED = Counter(
    "agentdesk_runs_finished",
    "Runs that ended, by final status and stop reason.",
    ["agent_type", "status", "stop_reason"],
)
# An experiment's runs (evals/: rehearsals on recorded tool replies) are none of the agents'
# runs: the three run metrics above and below leave them out, and count them here. Their model
# calls and tool calls are real load and spend: the step, model and tool metrics include them.
EVALUATION_RUNS_FINISHED = Counter(
    "agentdesk_evaluation_runs_finished",
    "Experiments' runs (evaluations) that ended, by final status; not in the runs_* figures.",
    ["status"],
)
RUN_DURATION = Histogram(
    "agentdesk_run_duration_seconds",
    "From a run's first claim to its end (waits for people and timers included).",
    ["agent_type", "status"],
    buckets=RUN_BUCKETS,
)
DELIVERIES_IN_PROGRESS = Gauge(
    "agentdesk_run_deliveries_in_progress",
    "Runs a worker is working on now (claimed and not yet ended or parked).",
    multiprocess_mode="livesum",
)
STEP_DURATION = Histogram(
    "agentdesk_step_duration_seconds",
    "One step of a run: a model call and its persisted reply (think), or one tool call and its "
    "persisted result (act).",
    ["step_type"],
    buckets=STEP_BUCKETS,
)
MODEL_CALL_DURATION = Histogram(
    "agentdesk_model_call_duration_seconds",
    "A model call as the provider answered it, retries included.",
    ["provider", "model"],
    buckets=MODEL_BUCKETS,
)
MODEL_CALL_ERRORS = Counter(
    "agentdesk_model_call_errors",
    "Model calls that failed after their retries, by error code.",
    ["provider", "model", "code"],
)
MODEL_TOKENS = Counter(
    "agentdesk_model_tokens",
    "Tokens of model calls: input, output, cache_read, cache_write.",
    ["provider", "model", "kind"],
)
MODEL_COST = Counter(
    "agentdesk_model_cost_usd",
    "Cost of model calls in US dollars (the agency's or the platform's prices).",
    ["provider", "model"],
)
TOOL_CALLS = Counter(
    "agentdesk_tool_calls",
    "Tool calls settled (ran, failed or refused), by outcome.",
    ["tool", "outcome"],
)
TOOL_ERRORS = Counter(
    "agentdesk_tool_errors",
    "Tool calls that ended with an error for the model, by error code.",
    ["tool", "code"],
)
BUDGET_REFUSALS = Counter(
    "agentdesk_budget_refusals",
    "Work refused because the agency's daily budget was exhausted: a model call (the run "
    "ends) or an approved call about to run.",
    ["stage"],
)
RATE_LIMIT_PARKS = Counter(
    "agentdesk_provider_rate_limit_parks",
    "Runs parked until the provider's own rate limit window has room.",
    ["provider", "limit"],
)
REAPER_REDELIVERIES = Counter(
    "agentdesk_reaper_redeliveries",
    "Work the reaper sent again: runs of a lost worker (heartbeat stopped or lease expired), "
    "runs still pending, runs whose timer was due, events still undispatched.",
    ["kind"],
)
APPROVALS_REQUESTED = Counter(
    "agentdesk_approvals_requested",
    "Approvals requested by the risk gate.",
    ["risk_level"],
)
APPROVALS_RESOLVED = Counter(
    "agentdesk_approvals_resolved",
    "Approvals decided or expired.",
    ["outcome"],
)
QUESTIONS_ASKED = Counter(
    "agentdesk_questions_asked",
    "Questions to a person: the agent's ask_user or a correction after repeated failures.",
    ["kind"],
)
QUESTIONS_RESOLVED = Counter(
    "agentdesk_questions_resolved",
    "Questions answered, stopped or expired.",
    ["kind", "outcome"],
)
DB_POOL_REPLACEMENTS = Counter(
    "agentdesk_db_pool_replacements",
    "Database connection pools a web process replaced because the database answered a new "
    "connection while the pool gave none (core.database.refused_for_outage): a last resort, "
    "0 unless connections were held somewhere.",
)
