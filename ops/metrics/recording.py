"""What the runtime, the tool executor, the approvals and the reaper call to record a metric.

Each function costs a global check when metrics are off (``AGENTDESK_METRICS=false``: the
client library is then never imported) and a few microseconds when on: one lock and one write
to a memory-mapped file per sample. The run's per-step metrics go through a :class:`RunMeter`
made once per delivery, with its label children looked up once.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction

if TYPE_CHECKING:
    from agents.llm import Completion
    from agents.models import Agent, Execution

logger = logging.getLogger(__name__)

ENABLED: bool = settings.AGENTDESK_METRICS
if ENABLED:
    try:
        from ops.metrics import definitions as m
    except OSError as exc:  # the samples' directory cannot be created or written
        logger.error("metrics off in this process: %s (PROMETHEUS_MULTIPROC_DIR)", exc)
        ENABLED = False
    else:
        from ops.metrics import celery_signals  # noqa: F401 - pool processes give gauges back

# A configured model name is bounded by what staff configure; a server may report any length.
LABEL_MAX = 100
# The agent types of agents this process has seen (the finish of a run may happen where the
# agent was not loaded: an approver's decision, a cancel); bounded.
_AGENT_TYPES_MAX = 10_000
_agent_types: dict[uuid.UUID, str] = {}
_agent_types_lock = threading.Lock()


def _label(value: str | None) -> str:
    return (value or "unknown")[:LABEL_MAX]


def _remember_agent_type(agent_id: uuid.UUID, agent_type: str) -> None:
    with _agent_types_lock:
        if len(_agent_types) >= _AGENT_TYPES_MAX:
            _agent_types.clear()
        _agent_types[agent_id] = agent_type


def _agent_type(agent_id: uuid.UUID) -> str:
    """The agent's type: remembered, or read (in the caller's agency transaction)."""
    known = _agent_types.get(agent_id)
    if known is not None:
        return known
    from agents.models import Agent  # noqa: PLC0415 - agents' modules import this one

    found = Agent.objects.filter(pk=agent_id).values_list("agent_type", flat=True).first()
    agent_type = found or "unknown"
    _remember_agent_type(agent_id, agent_type)
    return agent_type


# --- runs -------------------------------------------------------------------------------------
def run_started(agent: Agent, *, trigger: str, purpose: str = "run") -> None:
    """A run's first claim committed (an experiment's run, ``purpose`` "evaluation": not
    counted as the agent's)."""
    if ENABLED and purpose == "run":
        _remember_agent_type(agent.pk, agent.agent_type)
        m.RUNS_STARTED.labels(agent.agent_type, _label(trigger)).inc()


def run_finished(execution: Execution) -> None:
    """A run ended (``agents.lifecycle.finish_execution``, in the ending transaction):
    counted once that transaction commits."""
    if not ENABLED:
        return
    status, reason = str(execution.status), _label(execution.stop_reason)
    if execution.purpose != "run":  # an experiment's: counted apart

        def record_evaluation() -> None:
            m.EVALUATION_RUNS_FINISHED.labels(status).inc()

        transaction.on_commit(record_evaluation)
        return
    agent_type = _agent_type(execution.agent_id)
    seconds = (execution.duration_ms or 0) / 1000

    def record() -> None:
        m.RUNS_FINISHED.labels(agent_type, status, reason).inc()
        m.RUN_DURATION.labels(agent_type, status).observe(seconds)

    transaction.on_commit(record)


@contextmanager
def delivery_in_progress() -> Iterator[None]:
    """A worker works on a run inside the block."""
    if not ENABLED:
        yield
        return
    m.DELIVERIES_IN_PROGRESS.inc()
    try:
        yield
    finally:
        m.DELIVERIES_IN_PROGRESS.dec()


class RunMeter:
    """The per-step metrics of one delivery of a run (model, tokens, cost, steps)."""

    def __init__(self, *, agent: Agent, provider: str, model: str) -> None:
        self.provider, self.model = _label(provider), _label(model)
        if not ENABLED:
            return
        _remember_agent_type(agent.pk, agent.agent_type)  # for the run's end, in this process
        self._latency = m.MODEL_CALL_DURATION.labels(self.provider, self.model)
        self._tokens = {
            kind: m.MODEL_TOKENS.labels(self.provider, self.model, kind)
            for kind in ("input", "output", "cache_read", "cache_write")
        }
        self._cost = m.MODEL_COST.labels(self.provider, self.model)
        self._think = m.STEP_DURATION.labels("think")
        self._act = m.STEP_DURATION.labels("act")

    def model_replied(self, completion: Completion, cost: Decimal) -> None:
        if not ENABLED:
            return
        self._latency.observe(completion.latency_ms / 1000)
        usage = completion.usage
        for kind, tokens in (
            ("input", usage.input_tokens),
            ("output", usage.output_tokens),
            ("cache_read", usage.cache_read_tokens),
            ("cache_write", usage.cache_write_tokens),
        ):
            if tokens:
                self._tokens[kind].inc(tokens)
        if cost:
            self._cost.inc(float(cost))

    def model_failed(self, code: str) -> None:
        if ENABLED:
            m.MODEL_CALL_ERRORS.labels(self.provider, self.model, _label(code)).inc()

    def think_step(self, seconds: float) -> None:
        if ENABLED:
            self._think.observe(seconds)

    def act_step(self, seconds: float) -> None:
        if ENABLED:
            self._act.observe(seconds)

    def rate_limit_parked(self, limit: str) -> None:
        if ENABLED:
            m.RATE_LIMIT_PARKS.labels(self.provider, _label(limit)).inc()


def budget_refused(stage: str) -> None:
    """``stage``: ``model_call`` (the run ends ``budget_exceeded``) or ``approved_call``."""
    if ENABLED:
        m.BUDGET_REFUSALS.labels(stage).inc()


# --- tools --------------------------------------------------------------------------------------
def tool_call_settled(*, tool: str | None, outcome: str, error: Any) -> None:
    """A tool call's result recorded (``tool`` ``None``: a name the run was not offered, which
    the model chose and must not become a label); ``error``: the result's ``error`` object."""
    if not ENABLED:
        return
    name = _label(tool) if tool else "not_offered"
    m.TOOL_CALLS.labels(name, outcome).inc()
    if error:
        code = error.get("code") if isinstance(error, dict) else None
        m.TOOL_ERRORS.labels(name, _label(str(code or "error"))).inc()


# --- people ---------------------------------------------------------------------------------------
def approval_requested(risk_level: str) -> None:
    if ENABLED:
        m.APPROVALS_REQUESTED.labels(_label(risk_level)).inc()


def approval_resolved(outcome: str) -> None:
    """``approved``, ``denied`` or ``expired``; counted once the decision commits."""
    if ENABLED:
        transaction.on_commit(m.APPROVALS_RESOLVED.labels(_label(outcome)).inc)


def question_asked(kind: str) -> None:
    if ENABLED:
        m.QUESTIONS_ASKED.labels(_label(kind)).inc()


def question_resolved(kind: str, outcome: str) -> None:
    """``answered``, ``stopped`` or ``expired``; counted once the answer commits."""
    if ENABLED:
        transaction.on_commit(m.QUESTIONS_RESOLVED.labels(_label(kind), _label(outcome)).inc)


# --- reaper ---------------------------------------------------------------------------------------
def reaper_redelivered(kind: str | None = None, n: int = 0, /, **counts: int) -> None:
    """What one reaper tick sent again: ``reaper_redelivered("worker_lost", 3)`` or, for a
    tick's kinds at once, ``reaper_redelivered(worker_lost=3, pending=0, ...)``."""
    if not ENABLED:
        return
    if kind is not None:
        counts[kind] = counts.get(kind, 0) + n
    for name, count in counts.items():
        if count:
            m.REAPER_REDELIVERIES.labels(name).inc(count)


def db_pool_replaced(sender: object = None, **kwargs: object) -> None:
    """A web process replaced its stalled database pool (core.database.pool_replaced)."""
    if ENABLED:
        m.DB_POOL_REPLACEMENTS.inc()
