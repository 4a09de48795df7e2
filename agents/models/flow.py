"""Execution flow tracking (seed 003): state transitions, decision points, agent-to-agent messages.

They answer "what is the agent doing right now, is it stuck or looping, why did it choose X, who
asked whom": the runtime writes one transition per status change of an :class:`Execution`.
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.utils import timezone

from agents.models.agent import Agent
from agents.models.execution import Execution, ExecutionStatus, ExecutionStep
from core.models import AgencyOwnedModel


class TransitionType(models.TextChoices):
    NORMAL = "normal", "Normal"
    ERROR = "error", "Error"
    RETRY = "retry", "Retry"  # a redelivery or resume after a crash
    SKIP = "skip", "Skip"
    JUMP = "jump", "Jump"  # an operator's intervention (cancel, manual resume)


class StateTransition(AgencyOwnedModel):
    """One status change of an execution (seed 003 ``agent_execution_state_transitions``)."""

    execution = models.ForeignKey(
        Execution, on_delete=models.CASCADE, related_name="state_transitions"
    )
    from_state = models.CharField(max_length=20, choices=ExecutionStatus.choices, blank=True)
    to_state = models.CharField(max_length=20, choices=ExecutionStatus.choices)
    sequence = models.PositiveIntegerField()  # order of states within the execution

    transition_reason = models.TextField(blank=True)
    transition_type = models.CharField(
        max_length=10, choices=TransitionType.choices, default=TransitionType.NORMAL
    )
    triggered_by_event = models.CharField(max_length=100, blank=True)  # "tool_completed", ...
    event_metadata = models.JSONField(default=dict, blank=True)

    entered_at = models.DateTimeField(default=timezone.now)
    exited_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField("duration (ms)", null=True, blank=True)
    state_data = models.JSONField(default=dict, blank=True)  # snapshot of the run's state

    class Meta:
        ordering = ["execution_id", "sequence"]
        indexes = [
            models.Index(fields=["to_state"], name="agents_transition_state_idx"),
            models.Index(fields=["-entered_at"], name="agents_transition_entered_idx"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["execution", "sequence"], name="agents_statetransition_unique_sequence"
            ),
            models.CheckConstraint(
                condition=models.Q(from_state__in=[*ExecutionStatus.values, ""]),
                name="agents_statetransition_from_state_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(to_state__in=ExecutionStatus.values),
                name="agents_statetransition_to_state_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(transition_type__in=TransitionType.values),
                name="agents_statetransition_type_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.from_state or '∅'} -> {self.to_state}"


class DecisionType(models.TextChoices):
    TOOL_SELECTION = "tool_selection", "Tool selection"
    RISK_ASSESSMENT = "risk_assessment", "Risk assessment / approval routing"
    ERROR_RECOVERY = "error_recovery", "Error recovery strategy"
    DELEGATION = "delegation", "Delegation to another agent"
    CLARIFICATION = "clarification", "Ask for clarification"
    COMPLETION = "completion", "Finish or continue"


class DecisionMethod(models.TextChoices):
    RULE_BASED = "rule_based", "Rule based"
    LLM_BASED = "llm_based", "LLM based"
    CONFIDENCE_THRESHOLD = "confidence_threshold", "Confidence threshold"
    USER_INPUT = "user_input", "User input"


class DecisionPoint(AgencyOwnedModel):
    """Why the agent chose what it chose (seed 003 ``agent_execution_decision_points``)."""

    execution = models.ForeignKey(
        Execution, on_delete=models.CASCADE, related_name="decision_points"
    )
    step = models.ForeignKey(
        ExecutionStep,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="decision_points",
    )
    decision_type = models.CharField(max_length=20, choices=DecisionType.choices)
    decision_question = models.TextField()
    available_options = models.JSONField(default=list)
    chosen_option = models.JSONField()
    chosen_option_index = models.IntegerField(null=True, blank=True)

    reasoning = models.TextField(blank=True)
    confidence_score = models.FloatField(null=True, blank=True)  # 0.0 - 1.0
    decision_method = models.CharField(max_length=24, choices=DecisionMethod.choices, blank=True)
    # Ids of the approvals.RiskRule rows that decided a rule-based choice.
    rules_applied = ArrayField(models.UUIDField(), default=list, blank=True)
    rejected_options = models.JSONField(null=True, blank=True)
    rejection_reasons = models.JSONField(null=True, blank=True)
    decided_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["decided_at"]
        # Seed 003 also indexes decision_type and confidence_score; no page or query here
        # looks rows up by either (the admin filters within an agency), and a row is written
        # with every model reply: only the foreign keys' indexes (migration agents 0022).
        constraints = [
            models.CheckConstraint(
                condition=models.Q(decision_type__in=DecisionType.values),
                name="agents_decisionpoint_type_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(decision_method__in=[*DecisionMethod.values, ""]),
                name="agents_decisionpoint_method_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(confidence_score__isnull=True)
                | models.Q(confidence_score__gte=0, confidence_score__lte=1),
                name="agents_decisionpoint_confidence_range",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.decision_type}: {self.decision_question[:60]}"


class MessageType(models.TextChoices):
    TASK_DELEGATION = "task_delegation", "Task delegation"
    QUESTION = "question", "Question"
    RESULT = "result", "Result"
    ERROR_NOTIFICATION = "error_notification", "Error notification"
    COLLABORATION_REQUEST = "collaboration_request", "Collaboration request"
    STATUS_UPDATE = "status_update", "Status update"
    RESOURCE_REQUEST = "resource_request", "Resource request"


class MessageChannel(models.TextChoices):
    DIRECT_CALL = "direct_call", "Direct call (same worker)"
    TASK_QUEUE = "task_queue", "Task queue (Celery)"
    DATABASE = "database", "Database (polled)"


class AgentMessage(AgencyOwnedModel):
    """Agent-to-agent communication (seed 003 ``agent_execution_communications``)."""

    from_execution = models.ForeignKey(
        Execution,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="messages_sent",
    )
    to_execution = models.ForeignKey(
        Execution,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="messages_received",
    )
    from_agent = models.ForeignKey(
        Agent, null=True, on_delete=models.SET_NULL, related_name="messages_sent"
    )
    to_agent = models.ForeignKey(
        Agent, null=True, on_delete=models.SET_NULL, related_name="messages_received"
    )

    message_type = models.CharField(max_length=24, choices=MessageType.choices)
    content = models.JSONField()

    is_request = models.BooleanField("asks for an answer", default=True)
    request_id = models.UUIDField(null=True, blank=True)  # links a request and its response
    in_response_to = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="responses"
    )
    channel = models.CharField(
        max_length=16, choices=MessageChannel.choices, default=MessageChannel.TASK_QUEUE
    )

    sent_at = models.DateTimeField(default=timezone.now)
    received_at = models.DateTimeField(null=True, blank=True)
    responded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["sent_at"]
        indexes = [
            models.Index(fields=["message_type"], name="agents_message_type_idx"),
            models.Index(fields=["request_id"], name="agents_message_request_idx"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(message_type__in=MessageType.values),
                name="agents_agentmessage_type_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(channel__in=MessageChannel.values),
                name="agents_agentmessage_channel_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.message_type} {self.from_agent_id} -> {self.to_agent_id}"
