"""Prometheus metrics (README "Operations: metrics and traces").

Recording (the runtime, the tool executor, the approvals, the reaper): the functions and
:class:`RunMeter` below, from :mod:`ops.metrics.recording`. Reading: ``GET /metrics``
(:mod:`ops.views`), which sums every process's samples (:mod:`ops.metrics.multiprocess`) and
adds the gauges computed when it is read (:mod:`ops.metrics.exposition`).
"""

from ops.metrics.recording import (
    ENABLED,
    RunMeter,
    approval_requested,
    approval_resolved,
    budget_refused,
    delivery_in_progress,
    question_asked,
    question_resolved,
    reaper_redelivered,
    run_finished,
    run_started,
    tool_call_settled,
)

__all__ = [
    "ENABLED",
    "RunMeter",
    "approval_requested",
    "approval_resolved",
    "budget_refused",
    "delivery_in_progress",
    "question_asked",
    "question_resolved",
    "reaper_redelivered",
    "run_finished",
    "run_started",
    "tool_call_settled",
]
