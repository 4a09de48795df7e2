"""Human approval of risky tool calls (seed 004 ``ai_agent_approvals``) and the risk rules."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from agents.models import Agent, Execution
from core.models import AgencyOwnedModel, Site
from tools.models import ToolCall


class RiskLevel(models.TextChoices):
    LOW = "low", "Low"
    MEDIUM = "medium", "Medium"
    HIGH = "high", "High"
    CRITICAL = "critical", "Critical"


class RiskRule(AgencyOwnedModel):
    """A rule that rates a tool call's risk and may require an approval before it runs.

    Seed 004's ``assessRisk`` rules are platform rules (``agency`` NULL, readable by every agency,
    seeded by a migration); an agency adds its own. ``tool_pattern`` uses the wildcards of agents'
    allowed/denied tools (``crm_delete_*``). ``condition`` narrows the rule to certain arguments,
    e.g. ``{"argument": "to", "min_items": 10}``; an empty condition matches every call.
    """

    agency = models.ForeignKey(  # type: ignore[assignment]
        "core.Agency", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    tool_pattern = models.CharField(max_length=100)
    condition = models.JSONField(default=dict, blank=True)
    risk_level = models.CharField(max_length=10, choices=RiskLevel.choices)
    requires_approval = models.BooleanField(default=True)
    priority = models.PositiveSmallIntegerField(default=100)  # lower is evaluated first
    is_active = models.BooleanField("active", default=True)

    class Meta:
        ordering = ["priority", "name"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(risk_level__in=RiskLevel.values),
                name="approvals_riskrule_risk_level_valid",
            ),
            models.UniqueConstraint(
                fields=["agency", "name"],
                nulls_distinct=False,
                name="approvals_riskrule_unique_name",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.tool_pattern} → {self.risk_level})"


class ApprovalStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    APPROVED = "approved", "Approved"
    DENIED = "denied", "Denied"
    EXPIRED = "expired", "Expired"
    CANCELLED = "cancelled", "Cancelled"  # the execution was cancelled while waiting


DECIDED_STATUSES = (ApprovalStatus.APPROVED, ApprovalStatus.DENIED)


class Approval(AgencyOwnedModel):
    """A tool call waiting for (or decided by) a human; its execution waits meanwhile."""

    execution = models.ForeignKey(Execution, on_delete=models.CASCADE, related_name="approvals")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="approvals")
    site = models.ForeignKey(Site, on_delete=models.CASCADE, related_name="+")
    tool_call = models.ForeignKey(
        ToolCall, null=True, blank=True, on_delete=models.CASCADE, related_name="approvals"
    )
    risk_rule = models.ForeignKey(
        RiskRule, null=True, blank=True, on_delete=models.SET_NULL, related_name="approvals"
    )

    action_type = models.CharField(max_length=100)  # the tool name
    action_description = models.TextField()
    proposed_arguments = models.JSONField(default=dict, blank=True)
    # Set when the approver changed the arguments; the tool then runs with these.
    edited_arguments = models.JSONField(null=True, blank=True)

    risk_level = models.CharField(max_length=10, choices=RiskLevel.choices)
    risk_explanation = models.TextField(blank=True)

    status = models.CharField(
        max_length=10, choices=ApprovalStatus.choices, default=ApprovalStatus.PENDING
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_reason = models.TextField(blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # The approvers' queue (seed: idx_ai_agent_approvals_pending).
            models.Index(
                fields=["status", "site"],
                name="approvals_pending_idx",
                condition=models.Q(status="pending"),
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=ApprovalStatus.values),
                name="approvals_approval_status_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(risk_level__in=RiskLevel.values),
                name="approvals_approval_risk_level_valid",
            ),
            # Approved or denied means someone decided at some time; pending means nobody yet.
            models.CheckConstraint(
                condition=models.Q(status__in=DECIDED_STATUSES, decided_at__isnull=False)
                | models.Q(status="pending", decided_at__isnull=True)
                | models.Q(status__in=[ApprovalStatus.EXPIRED, ApprovalStatus.CANCELLED]),
                name="approvals_approval_decision_consistent",
            ),
            # A double click or a redelivery cannot open a second pending approval for one call.
            models.UniqueConstraint(
                fields=["tool_call"],
                condition=models.Q(status="pending"),
                name="approvals_approval_one_pending_per_call",
            ),
        ]

    def __str__(self) -> str:
        # The admin's title and breadcrumb: named as its tool call is, "Send email (pending)".
        tool = self.tool_call.tool_label if self.tool_call is not None else self.action_type
        return f"{tool} ({self.get_status_display().lower()})"


class QuestionKind(models.TextChoices):
    QUESTION = "question", "Question"  # the agent asked (the ask_user tool)
    CORRECTION = "correction", "Help after failures"  # a tool failed max_corrections times


class QuestionStatus(models.TextChoices):
    """Seed 000 ``agent_clarifications.status``; ``cancelled`` when the run ended first."""

    PENDING = "pending", "Pending"
    ANSWERED = "answered", "Answered"
    SKIPPED = "skipped", "Stopped"  # a correction answered "stop": the run ended
    TIMED_OUT = "timed_out", "Expired"
    CANCELLED = "cancelled", "Cancelled"


class CorrectionChoice(models.TextChoices):
    """The answers a correction question offers (seed 000: "pause, show error, ask for help")."""

    RETRY = "retry", "Retry with a hint"
    STOP = "stop", "Stop the run"


class Question(AgencyOwnedModel):
    """A run waiting for a person's answer (seed 000 ``agent_clarifications``): a question the
    agent asked with ``ask_user``, or, for a ``correction``, the errors of a tool that kept
    failing. The run waits in ``waiting_input`` holding no worker; the answer resumes it."""

    execution = models.ForeignKey(Execution, on_delete=models.CASCADE, related_name="questions")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="questions")
    site = models.ForeignKey(Site, on_delete=models.CASCADE, related_name="+")
    # The ask_user call the answer is the result of (seed: related_action_id); none for a
    # correction, whose failed calls are recorded with their steps.
    tool_call = models.ForeignKey(
        ToolCall, null=True, blank=True, on_delete=models.CASCADE, related_name="questions"
    )

    kind = models.CharField(max_length=12, choices=QuestionKind.choices)
    question = models.TextField()
    question_type = models.CharField(max_length=50, blank=True)  # seed: 'missing_info', ...
    options = models.JSONField(default=list, blank=True)  # answers to pick from
    allow_other = models.BooleanField(default=True)  # any text, not only one of the options
    triggered_by = models.TextField(blank=True)  # what caused the need to ask
    # What the person needs to judge: a correction's failed calls (tool, arguments, error).
    context = models.JSONField(default=dict, blank=True)

    status = models.CharField(
        max_length=10, choices=QuestionStatus.choices, default=QuestionStatus.PENDING
    )
    user_response = models.TextField(blank=True)
    responded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    response_timestamp = models.DateTimeField(null=True, blank=True)
    resolution_action = models.TextField(blank=True)  # what the run did with the answer
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # Seed: idx_clarifications_pending; also what the expiry job scans.
            models.Index(
                fields=["expires_at"],
                name="approvals_question_pending_idx",
                condition=models.Q(status="pending"),
            ),
            models.Index(fields=["execution"], name="approvals_question_exec_idx"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=QuestionStatus.values),
                name="approvals_question_status_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(kind__in=QuestionKind.values),
                name="approvals_question_kind_valid",
            ),
            models.CheckConstraint(
                condition=~models.Q(status__in=["answered", "skipped"])
                | models.Q(response_timestamp__isnull=False),
                name="approvals_question_answer_consistent",
            ),
            # A run waits for one answer at a time.
            models.UniqueConstraint(
                fields=["execution"],
                condition=models.Q(status="pending"),
                name="approvals_question_one_pending_per_run",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.question[:60]} ({self.status})"
