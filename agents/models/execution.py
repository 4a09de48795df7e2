"""Executions (one agent run, a durable state machine), their steps and the trigger log."""

from __future__ import annotations

import json
from decimal import Decimal

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex
from django.db import models

from agents.models.agent import Agent
from core.models import AgencyOwnedModel, Event, Site


class ExecutionStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    WAITING_APPROVAL = "waiting_approval", "Waiting for approval"
    WAITING_INPUT = "waiting_input", "Waiting for input"
    WAITING_AGENT = "waiting_agent", "Waiting for another agent"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    TIMED_OUT = "timed_out", "Timed out"


TERMINAL_STATUSES = frozenset(
    {
        ExecutionStatus.COMPLETED,
        ExecutionStatus.FAILED,
        ExecutionStatus.CANCELLED,
        ExecutionStatus.TIMED_OUT,
    }
)


class StopReason(models.TextChoices):
    """Why the loop stopped (``""`` while it has not)."""

    FINAL_ANSWER = "final_answer", "Final answer"  # the model answered; no more tool calls
    MAX_STEPS = "max_steps", "Reached max_steps_per_run"
    MAX_TOOL_CALLS = "max_tool_calls", "Reached max_tool_calls_per_step"
    TIMEOUT = "timeout", "Reached timeout_seconds"
    BUDGET_EXCEEDED = "budget_exceeded", "Daily budget exceeded"
    QUOTA_EXCEEDED = "quota_exceeded", "Period quota exceeded"
    APPROVAL_DENIED = "approval_denied", "Approval denied"
    APPROVAL_EXPIRED = "approval_expired", "Approval expired"
    QUESTION_EXPIRED = "question_expired", "Question unanswered"
    TOOL_FAILURES = "tool_failures", "Stopped after repeated tool failures"
    LOOP_DETECTED = "loop_detected", "Stopped: the agent kept repeating itself"
    STUCK = "stuck", "Cancelled: stuck longer than expected"
    CANCELLED = "cancelled", "Cancelled"
    ERROR = "error", "Error"


class TriggerType(models.TextChoices):
    MANUAL = "manual", "Manual"  # admin or API "execute"
    EVENT = "event", "Event"  # a platform or ai.* event the agent subscribes to
    SCHEDULE = "schedule", "Schedule"  # cron (Celery beat)
    WEBHOOK = "webhook", "Webhook"
    AGENT = "agent", "Another agent"  # delegation by an orchestrator


class ExecutionPurpose(models.TextChoices):
    """What a run is for. An evaluation run (an experiment's, evals/) goes through the real
    runtime on recorded tool replies: its tokens are real spend (the budget counts them, usage
    keeps them on "evaluation" rows), but it is no run of the agent's work: the lifecycle leaves
    the agent's stats alone and owes it no after-run work (memory, quality, learning), and
    memory records no episode of it."""

    RUN = "run", "Run"
    EVALUATION = "evaluation", "Evaluation"


# The longest instruction a run may be started with (API and admin alike).
INPUT_MAX_CHARS = 20_000


class Execution(AgencyOwnedModel):
    """One run of an agent (seed 004 ``ai_agent_executions``): a state machine in PostgreSQL.

    Celery only delivers work: a worker claims the row with a lease (``lease_owner``,
    ``lease_expires_at``), a second delivery finds it claimed and exits, and a run that waits
    (approval, input, ``wait_until``) holds no worker. ``sequence`` numbers the broadcasts of
    this execution so that a reconnecting client can ask for what it missed.
    """

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="executions")
    site = models.ForeignKey(Site, on_delete=models.CASCADE, related_name="+")
    # The run whose event started this one (seed 003's parent session), and how many runs in a
    # row, each started by the previous one's event, led to it (0: started by a person, a
    # schedule, a webhook or an API client). See AGENTDESK_MAX_RUN_CHAIN_DEPTH.
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children"
    )
    depth = models.PositiveSmallIntegerField(default=0)

    trigger_type = models.CharField(max_length=16, choices=TriggerType.choices)
    purpose = models.CharField(
        max_length=16, choices=ExecutionPurpose.choices, default=ExecutionPurpose.RUN
    )
    trigger_event = models.ForeignKey(
        Event, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    trigger_data = models.JSONField(default=dict, blank=True)
    triggered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    status = models.CharField(
        max_length=20, choices=ExecutionStatus.choices, default=ExecutionStatus.PENDING
    )
    stop_reason = models.CharField(max_length=20, choices=StopReason.choices, blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    # The budget reservation of the model call under way ({"budget_id", "amount"}), committed
    # with the reservation and cleared when the call's cost is settled: a worker lost during
    # the call leaves it here, and the run's next claim (or its end) releases it.
    budget_reservation = models.JSONField(null=True, blank=True)

    # Claiming and resuming.
    lease_owner = models.CharField(max_length=200, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)  # deliveries that claimed the run
    sequence = models.PositiveBigIntegerField(default=0)  # last broadcast number
    wait_until = models.DateTimeField(null=True, blank=True)  # the `wait` tool's timer
    # What a waiting_input run asked ({"question", "options", ...}); the answer becomes a step.
    input_request = models.JSONField(default=dict, blank=True)

    # Context: the config the run started with, so a resume after an edit behaves the same.
    config_snapshot = models.JSONField(default=dict, blank=True)
    # The agent's version at the run's first claim, whose configuration the run keeps to its end
    # (null for runs started before versions existed). Indexed partially (below).
    agent_version = models.ForeignKey(
        "agents.AgentVersion",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="executions",
        db_index=False,
    )
    input = models.TextField(blank=True)  # the instruction of a manual run, or the goal
    initial_context = models.JSONField(default=dict, blank=True)
    current_context = models.JSONField(default=dict, blank=True)
    current_step = models.PositiveIntegerField(default=0)

    output = models.TextField(blank=True)  # the final answer
    result = models.JSONField(default=dict, blank=True)
    actions_taken = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    error_details = models.JSONField(null=True, blank=True)

    tokens_input = models.PositiveIntegerField(default=0)
    tokens_output = models.PositiveIntegerField(default=0)
    tokens_cache_read = models.PositiveIntegerField(default=0)
    tokens_cache_write = models.PositiveIntegerField(default=0)
    tokens_total = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(
        "cost (USD)", max_digits=12, decimal_places=6, default=Decimal(0)
    )
    llm_call_count = models.PositiveIntegerField("LLM calls", default=0)
    tool_call_count = models.PositiveIntegerField("tool calls", default=0)

    started_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField("duration (ms)", null=True, blank=True)
    trace_id = models.CharField(max_length=64, blank=True)  # distributed tracing

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # Also the reaper's: running executions, whose leases it checks. No index on
            # lease_expires_at itself: every step renews the lease, and an UPDATE that changes
            # no indexed column is a HOT update that writes no index entries (migration 0005).
            models.Index(fields=["status"], name="agents_execution_status_idx"),
            # An agency's runs by date: its lists (row-level security adds the agency) and the
            # retention purge's scan of the oldest (agents/retention.py).
            models.Index(fields=["agency", "-created_at"], name="agents_execution_agency_idx"),
            # The `wait` tool's timers.
            models.Index(
                fields=["wait_until"],
                name="agents_execution_wait_idx",
                condition=models.Q(wait_until__isnull=False),
            ),
            # A version's runs. Partial: a run is inserted without its version (no index entry
            # to write then) and gets it at its first claim, whose UPDATE is not HOT anyway (it
            # changes the indexed status). Built concurrently (migration 0018).
            models.Index(
                fields=["agent_version"],
                name="agents_execution_version_idx",
                condition=models.Q(agent_version__isnull=False),
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=ExecutionStatus.values),
                name="agents_execution_status_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(stop_reason__in=[*StopReason.values, ""]),
                name="agents_execution_stop_reason_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(trigger_type__in=TriggerType.values),
                name="agents_execution_trigger_type_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(purpose__in=ExecutionPurpose.values),
                name="agents_execution_purpose_valid",
            ),
        ]

    def __str__(self) -> str:
        # The admin's title and breadcrumbs of the run page: the id cut to 8 characters, as the
        # lists show it (the whole id squeezed the breadcrumb), and the status as people say it
        # ("waiting for another agent"), not its stored value.
        return f"Execution {str(self.pk)[:8]} ({self.get_status_display().lower()})"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @property
    def is_evaluation(self) -> bool:
        """An experiment's run, not the agent's work (:class:`ExecutionPurpose`)."""
        return self.purpose == ExecutionPurpose.EVALUATION

    def first_user_message(self) -> str:
        """What the agent is asked: the run's input, else a description of its trigger."""
        if self.input:
            return self.input
        trigger = {"trigger": self.trigger_type, "data": self.trigger_data}
        return "You were triggered with:\n" + json.dumps(trigger, default=str, indent=1)


class StepType(models.TextChoices):
    OBSERVE = "observe", "Observe"  # gathering information (trigger, tool results, answers)
    THINK = "think", "Think"  # an LLM call: reasoning and tool calls
    ACT = "act", "Act"  # one tool call
    REFLECT = "reflect", "Reflect"  # evaluating a result, self-correction


class ExecutionStep(AgencyOwnedModel):
    """One step of the trace (seed 004 ``ai_agent_execution_steps``).

    A think step stores the full model reply in ``llm_response`` before any tool runs; an act
    step stores one tool call with the provider's ``tool_call_id``. Resume rebuilds the message
    list from these rows, so a completed LLM call or tool call is never repeated.
    """

    # Indexed by the unique (execution, step_number) constraint; no second index to write.
    execution = models.ForeignKey(
        Execution, on_delete=models.CASCADE, related_name="steps", db_index=False
    )
    step_number = models.PositiveIntegerField()
    step_type = models.CharField(max_length=10, choices=StepType.choices)
    # The execution's event number of this step (shared with its state transitions): what a
    # watcher that reconnects asks for (live/). Null for steps written before it existed.
    sequence = models.PositiveBigIntegerField(null=True, blank=True)

    input_text = models.TextField(blank=True)  # what the agent received
    reasoning = models.TextField(blank=True)  # the agent's reasoning
    output_text = models.TextField(blank=True)  # what the agent produced

    model = models.CharField(max_length=100, blank=True)
    llm_response = models.JSONField(null=True, blank=True)
    tool_name = models.CharField(max_length=100, blank=True)
    tool_call_id = models.CharField(max_length=200, blank=True)
    tool_input = models.JSONField(null=True, blank=True)
    tool_output = models.JSONField(null=True, blank=True)

    started_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField("duration (ms)", null=True, blank=True)

    tokens_input = models.PositiveIntegerField(default=0)
    tokens_output = models.PositiveIntegerField(default=0)
    tokens_cache_read = models.PositiveIntegerField(default=0)
    tokens_cache_write = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(
        "cost (USD)", max_digits=12, decimal_places=6, default=Decimal(0)
    )

    class Meta:
        ordering = ["execution_id", "step_number"]
        constraints = [
            models.UniqueConstraint(
                fields=["execution", "step_number"], name="agents_executionstep_unique_number"
            ),
            models.CheckConstraint(
                condition=models.Q(step_type__in=StepType.values),
                name="agents_executionstep_step_type_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.step_number} {self.step_type}"

    @property
    def tokens_used(self) -> int:
        return (
            self.tokens_input
            + self.tokens_output
            + self.tokens_cache_read
            + self.tokens_cache_write
        )


class TriggerOutcome(models.TextChoices):
    INVOKED = "invoked", "Invoked"
    SKIPPED = "skipped", "Skipped"


class SkipReason(models.TextChoices):
    AGENT_INACTIVE = "agent_inactive", "Agent inactive"
    CONDITIONS_NOT_MET = "conditions_not_met", "Trigger conditions not met"
    RATE_LIMITED = "rate_limited", "max_runs_per_hour / max_runs_per_day reached"
    BUDGET_EXCEEDED = "budget_exceeded", "Daily budget exceeded"
    QUOTA_EXCEEDED = "quota_exceeded", "Period quota exceeded"
    ALREADY_RUNNING = "already_running", "A run for the same trigger is under way"
    DUPLICATE = "duplicate", "Trigger already handled"
    CHAIN_TOO_DEEP = "chain_too_deep", "Too many agent runs in a row started each other"
    # Inbound webhooks (webhooks/): a refused delivery is logged and starts nothing.
    BAD_SIGNATURE = "bad_signature", "Webhook signature missing or wrong"
    STALE_TIMESTAMP = "stale_timestamp", "Webhook timestamp missing or too old"
    REPLAYED = "replayed", "Webhook delivery already received"
    TOO_LARGE = "too_large", "Webhook body over the size limit"
    THROTTLED = "throttled", "Too many deliveries (throttled)"
    WEBHOOK_DISABLED = "webhook_disabled", "Webhook disabled"
    BAD_PAYLOAD = "bad_payload", "Webhook body is not a JSON object"
    ERROR = "error", "Error while evaluating the trigger"


class TriggerLog(AgencyOwnedModel):
    """Each trigger an agent saw: invoked, or skipped and why (seed 001 ``agent_triggers``)."""

    agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.CASCADE, related_name="trigger_logs"
    )
    site = models.ForeignKey(
        Site, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    triggered_at = models.DateTimeField(auto_now_add=True)
    trigger_type = models.CharField(max_length=16, choices=TriggerType.choices)
    event_type = models.CharField(max_length=200, blank=True)  # or the cron / webhook name
    event = models.ForeignKey(
        Event, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    payload = models.JSONField(default=dict, blank=True)  # what was passed to the agent

    outcome = models.CharField(max_length=10, choices=TriggerOutcome.choices)
    skip_reason = models.CharField(max_length=32, choices=SkipReason.choices, blank=True)
    skip_detail = models.TextField(blank=True)
    execution = models.ForeignKey(
        Execution, null=True, blank=True, on_delete=models.SET_NULL, related_name="trigger_logs"
    )

    budget_used_today_usd = models.DecimalField(
        max_digits=12, decimal_places=6, null=True, blank=True
    )
    budget_remaining_usd = models.DecimalField(
        max_digits=12, decimal_places=6, null=True, blank=True
    )

    class Meta:
        # A row is one entry of the agent's trigger log ("12 trigger log entries"; the list
        # itself is the "Trigger log", as the sidebar names it).
        verbose_name = "trigger log entry"
        verbose_name_plural = "trigger log entries"
        ordering = ["-triggered_at"]
        indexes = [
            # By agency, then date: its lists and the retention purge (agents/retention.py).
            models.Index(fields=["agency", "-triggered_at"], name="agents_triggerlog_agency_idx"),
            models.Index(fields=["event_type"], name="agents_triggerlog_event_idx"),
            GinIndex(fields=["payload"], name="agents_triggerlog_payload_gin"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(trigger_type__in=TriggerType.values),
                name="agents_triggerlog_trigger_type_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(outcome__in=TriggerOutcome.values),
                name="agents_triggerlog_outcome_valid",
            ),
            # A skip always says why; an invocation never carries a skip reason.
            models.CheckConstraint(
                condition=models.Q(outcome="invoked", skip_reason="")
                | models.Q(outcome="skipped", skip_reason__in=SkipReason.values),
                name="agents_triggerlog_skip_reason_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.trigger_type} {self.event_type} -> {self.outcome}"
