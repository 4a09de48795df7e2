"""Flow analysis (issue 19, seed 003): expected workflows, completeness analyses, loops caught
while a run goes and runs flagged as stuck. (State transitions, decision points and agent
messages are the runtime's own rows: agents/models/flow.py.)"""

from __future__ import annotations

from typing import Any

from django.contrib.postgres.fields import ArrayField
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

from agents.models import Agent, AgentType, Execution, ExecutionStatus
from core.models import AgencyOwnedModel
from flow import schemas


class ExpectedWorkflow(AgencyOwnedModel):
    """What a run of an agent type (or of one agent) is expected to do (seed 003
    ``agent_workflow_pattern_definitions``). The most specific active one applies: the agent's
    own, else its type's."""

    name = models.CharField(max_length=200)
    category = models.CharField(
        max_length=50,
        blank=True,
        help_text="A label of your own to group workflows by, e.g. research or support.",
    )
    description = models.TextField(blank=True)
    agent_type = models.CharField(
        max_length=20,
        choices=AgentType.choices,
        blank=True,
        help_text="Applies to every agent of this type (unless the agent has its own).",
    )
    agent = models.ForeignKey(
        Agent,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="expected_workflows",
        help_text="Applies to this agent only; wins over its type's workflow.",
    )
    expected_states = models.JSONField(
        default=list,
        blank=True,
        help_text="The statuses a run should go through (pending, running, waiting_approval, "
        "waiting_input, waiting_agent, completed, failed, cancelled, timed_out), whether each "
        "is required, and how many seconds a run may stay in one before it counts as stuck "
        '(max_duration_seconds; else the agent\'s own "Stuck after"). Empty: none expected.',
    )
    expected_actions = models.JSONField(
        default=list,
        blank=True,
        help_text="The tools a run should call (a name may end in *: crm_*), whether each is "
        "required, and how many times at least and at most (min_count, max_count). Empty: none "
        "expected.",
    )
    expected_transitions = models.JSONField(
        default=list,
        blank=True,
        help_text="The moves from one status to another a run should make (is_required) or may "
        "make. Empty: none expected.",
    )
    max_duration_ms = models.PositiveIntegerField("max duration (ms)", null=True, blank=True)
    max_cost_usd = models.DecimalField(
        "max cost (USD)", max_digits=10, decimal_places=2, null=True, blank=True
    )
    max_llm_calls = models.PositiveIntegerField("max LLM calls", null=True, blank=True)
    success_conditions = models.JSONField(
        default=dict,
        blank=True,
        help_text="When a run counts as a success: the status it ends in and, if it matters, its "
        "stop reason (status, stop_reason). Empty: any run that ends.",
    )
    is_active = models.BooleanField("active", default=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["agency", "name"], name="flow_workflow_unique_name"),
            models.CheckConstraint(
                condition=~models.Q(agent_type="") | models.Q(agent__isnull=False),
                name="flow_workflow_type_or_agent",
            ),
            models.CheckConstraint(
                condition=models.Q(agent_type__in=[*AgentType.values, ""]),
                name="flow_workflow_agent_type_valid",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        errors: dict[str, str] = {}
        for field, schema in (
            ("expected_states", schemas.EXPECTED_STATES),
            ("expected_actions", schemas.EXPECTED_ACTIONS),
            ("expected_transitions", schemas.EXPECTED_TRANSITIONS),
        ):
            message = schemas.schema_error(schema, getattr(self, field))
            if message:
                errors[field] = f"Not a valid definition: {message}"
        if not errors:
            errors.update(_consistency_errors(self))
        if not self.agent_type and self.agent_id is None:
            errors["agent_type"] = "Choose an agent type, or an agent, that this workflow is for."
        agent = self.agent if self.agent_id is not None else None
        if agent is not None and self.agency_id and agent.agency_id != self.agency_id:
            errors["agent"] = "Choose an agent of this agency."
        if errors:
            raise ValidationError(errors)


def _consistency_errors(workflow: ExpectedWorkflow) -> dict[str, str]:
    """What the schemas cannot say: no state or action twice, counts in order, transitions
    between the states the workflow names."""
    errors: dict[str, str] = {}
    states = [s["state"] for s in workflow.expected_states]
    if len(set(states)) != len(states):
        errors["expected_states"] = "Each state may appear once."
    actions = [a["action"] for a in workflow.expected_actions]
    if len(set(actions)) != len(actions):
        errors["expected_actions"] = "Each action may appear once."
    for action in workflow.expected_actions:
        low, high = action.get("min_count"), action.get("max_count")
        if low is not None and high is not None and low > high:
            errors["expected_actions"] = (
                f"{action['action']}: min_count ({low}) is more than max_count ({high})."
            )
    if states:
        for transition in workflow.expected_transitions:
            unknown = [s for s in (transition["from"], transition["to"]) if s not in states]
            if unknown:
                errors["expected_transitions"] = (
                    f"{transition['from']} -> {transition['to']}: {', '.join(unknown)} is not "
                    "one of the expected states."
                )
    return errors


class CompletenessAnalysis(AgencyOwnedModel):
    """How a finished run compares with its expected workflow (seed 003
    ``agent_workflow_completeness_analysis``), computed once after the run ends."""

    execution = models.OneToOneField(
        Execution, on_delete=models.CASCADE, related_name="completeness"
    )
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="completeness")
    workflow = models.ForeignKey(
        ExpectedWorkflow, null=True, on_delete=models.SET_NULL, related_name="analyses"
    )
    completeness_score = models.FloatField()  # 0.0 - 1.0
    is_complete = models.BooleanField("complete", default=False)

    expected_states_visited = models.PositiveIntegerField(default=0)
    expected_states_total = models.PositiveIntegerField(default=0)
    visited_states = ArrayField(models.CharField(max_length=20), default=list, blank=True)
    missing_states = ArrayField(models.CharField(max_length=20), default=list, blank=True)
    unexpected_states_visited = ArrayField(
        models.CharField(max_length=20), default=list, blank=True
    )

    expected_actions_performed = models.PositiveIntegerField(default=0)
    expected_actions_total = models.PositiveIntegerField(default=0)
    performed_actions = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    missing_actions = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    unexpected_actions_performed = ArrayField(
        models.CharField(max_length=200), default=list, blank=True
    )

    expected_transitions_followed = models.PositiveIntegerField(default=0)
    expected_transitions_total = models.PositiveIntegerField(default=0)
    unexpected_transitions = ArrayField(models.CharField(max_length=50), default=list, blank=True)

    duration_within_bounds = models.BooleanField(null=True)
    cost_within_bounds = models.BooleanField(null=True)
    llm_calls_within_bounds = models.BooleanField(null=True)

    # [{"type": "infinite_loop" | "skipped_required_step" | "missing_action" | ..., "description"}]
    anomalies = models.JSONField(default=list, blank=True)
    analysis_result = models.JSONField(default=dict, blank=True)
    analyzed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-analyzed_at"]
        verbose_name_plural = "completeness analyses"
        indexes = [
            models.Index(fields=["agent", "-analyzed_at"], name="flow_analysis_agent_idx"),
            models.Index(fields=["completeness_score"], name="flow_analysis_score_idx"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(completeness_score__gte=0, completeness_score__lte=1),
                name="flow_analysis_score_range",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.completeness_score:.0%} of {self.workflow or 'no workflow'}"


class LoopKind(models.TextChoices):
    SAME_CALL = "same_call", "Same tool call with the same arguments"
    REPEATED_SEQUENCE = "repeated_sequence", "Same sequence of calls repeated"
    SAME_STATE = "same_state", "Same result observed again, whatever the arguments"


class LoopOutcome(models.TextChoices):
    WARNED = "warned", "Model warned"
    STOPPED = "stopped", "Run stopped"
    ASKED = "asked", "Person asked"


class LoopDetection(AgencyOwnedModel):
    """A loop caught while a run went: the warning the model got at the threshold, and what
    happened past it (the run stopped, or a person was asked)."""

    execution = models.ForeignKey(Execution, on_delete=models.CASCADE, related_name="loops")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="loops")
    kind = models.CharField(max_length=20, choices=LoopKind.choices)
    outcome = models.CharField(max_length=10, choices=LoopOutcome.choices)
    fingerprint = models.CharField(max_length=64)  # of the call, the state or the sequence
    repeated = models.JSONField(default=list)  # [{"tool", "arguments"}] once
    occurrences = models.PositiveIntegerField()
    threshold = models.PositiveSmallIntegerField()
    question = models.ForeignKey(
        "approvals.Question", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    detected_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["detected_at"]
        indexes = [models.Index(fields=["execution", "fingerprint"], name="flow_loop_exec_idx")]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(kind__in=LoopKind.values), name="flow_loop_kind_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(outcome__in=LoopOutcome.values),
                name="flow_loop_outcome_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} x{self.occurrences}: {self.get_outcome_display()}"


class StuckOutcome(models.TextChoices):
    NOTIFIED = "notified", "Approvers notified"
    CANCELLED = "cancelled", "Run cancelled"
    CANCEL_REQUESTED = "cancel_requested", "Cancel requested (the worker stops the run)"


class StuckRun(AgencyOwnedModel):
    """A run found in one state longer than expected: flagged once per run and state entered
    (its transition's sequence), escalated per the agent's stuck_action."""

    execution = models.ForeignKey(Execution, on_delete=models.CASCADE, related_name="stuck_flags")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="stuck_flags")
    state = models.CharField(max_length=20, choices=ExecutionStatus.choices)
    state_sequence = models.PositiveIntegerField()  # the StateTransition.sequence entering it
    entered_at = models.DateTimeField()
    expected_seconds = models.PositiveIntegerField()
    expected_from = models.CharField(max_length=20)  # "workflow" or "agent"
    action_taken = models.CharField(max_length=20, choices=StuckOutcome.choices)
    flagged_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-flagged_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["execution", "state_sequence"], name="flow_stuck_once_per_state"
            ),
            models.CheckConstraint(
                condition=models.Q(action_taken__in=StuckOutcome.values),
                name="flow_stuck_action_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(state__in=ExecutionStatus.values),
                name="flow_stuck_state_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"stuck in {self.state} since {self.entered_at:%Y-%m-%d %H:%M}"

    @property
    def stuck_seconds(self) -> int:
        return int((timezone.now() - self.entered_at).total_seconds())


def workflow_for(agent: Agent) -> ExpectedWorkflow | None:
    """The active workflow that applies to ``agent``: its own, else its type's (the newest).
    Precondition: the agent's agency context."""
    found: Any = (
        ExpectedWorkflow.objects.filter(agency_id=agent.agency_id, is_active=True)
        .filter(
            models.Q(agent_id=agent.pk) | models.Q(agent__isnull=True, agent_type=agent.agent_type)
        )
        .order_by(models.F("agent_id").asc(nulls_last=True), "-updated_at")
        .first()
    )
    return found
