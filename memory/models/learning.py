"""Learning from runs (seed 000): each finished run's quality, the approaches learned from good
runs, which of them each run was given, and the investigations runs made when a result looked
wrong. Models of the memory app (re-exported by memory.models and memory.learning.models)."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from pgvector.django import VectorField

from agents.models import Agent, Execution
from core.models import AgencyOwnedModel
from memory.models.memories import DIMENSIONS


class HumanMark(models.TextChoices):
    NONE = "", "Not marked"
    GOOD = "good", "Good"
    BAD = "bad", "Bad"


class RunQuality(AgencyOwnedModel):
    """How good one finished run was: a score (0-1) from explicit signals (memory.learning.quality),
    optionally a model judge's verdict, and a person's mark, which overrides the threshold."""

    execution = models.OneToOneField(Execution, on_delete=models.CASCADE, related_name="quality")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="run_qualities")
    score = models.FloatField()
    # {"goal": {"value", "weight", "contribution", "detail"}, "tools": ..., ...}
    signals = models.JSONField(default=dict, blank=True)
    judge_score = models.FloatField(null=True, blank=True)
    judge_verdict = models.CharField(max_length=20, blank=True)  # "good", "bad", "skipped: ..."
    judge_reason = models.TextField(blank=True)
    threshold = models.FloatField()  # the agent's quality_threshold when scored
    human_mark = models.CharField(max_length=4, choices=HumanMark.choices, blank=True)
    human_note = models.TextField(blank=True)
    marked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    marked_at = models.DateTimeField(null=True, blank=True)
    # The pattern this run taught or reinforced (learned once per run).
    pattern = models.ForeignKey(
        "memory.LearnedPattern",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="taught_by",
    )
    scored_at = models.DateTimeField()

    class Meta:
        ordering = ["-scored_at"]
        verbose_name = "run quality"
        verbose_name_plural = "run qualities"
        indexes = [
            models.Index(fields=["agency", "agent", "-scored_at"], name="memory_quality_agent_idx"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(score__gte=0, score__lte=1), name="memory_quality_score_range"
            ),
            models.CheckConstraint(
                condition=models.Q(human_mark__in=HumanMark.values),
                name="memory_quality_mark_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.score:.0%} ({self.human_mark or 'unmarked'})"

    @property
    def is_good(self) -> bool:
        """A person's mark decides; without one, the score against the threshold."""
        if self.human_mark:
            return self.human_mark == HumanMark.GOOD
        return self.score >= self.threshold


class LearnedPattern(AgencyOwnedModel):
    """An approach that worked (seed 000 "learned patterns"): for a task type, the tools used in
    order with their key arguments generalised (``<contact_id>``), found for a new run by the
    embedding of its task description. Reinforced by runs that repeat it, weakened by runs given
    it that went badly."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="learned_patterns")
    task_type = models.CharField(max_length=200)
    description = models.TextField()  # the task, as the run that taught it was asked
    tool_sequence = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    # [{"tool": name, "arguments": {key: "<placeholder>" or kept value}}, ...]
    steps = models.JSONField(default=list, blank=True)
    embedding = VectorField(dimensions=DIMENSIONS, null=True, blank=True)
    embedding_model = models.CharField(max_length=100, blank=True)
    confidence = models.DecimalField(max_digits=3, decimal_places=2, default=Decimal("0.70"))
    success_count = models.PositiveIntegerField(default=0)
    failure_count = models.PositiveIntegerField(default=0)
    source_executions = ArrayField(models.UUIDField(), default=list, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    is_active = models.BooleanField("active", default=True)

    class Meta:
        ordering = ["-confidence", "-updated_at"]
        indexes = [
            models.Index(
                fields=["agency", "agent", "task_type"], name="memory_pattern_agent_type_idx"
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(confidence__gte=0, confidence__lte=1),
                name="memory_pattern_confidence_range",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.task_type}: {' -> '.join(self.tool_sequence) or 'no tools'}"


class PatternOutcome(models.TextChoices):
    PENDING = "", "Run not scored yet"
    SUCCESS = "success", "Run went well"
    FAILURE = "failure", "Run went badly"


class PatternUse(AgencyOwnedModel):
    """A pattern given to a run at its start, and what the run's outcome did to the pattern
    (counted once; a later human mark may turn it round)."""

    execution = models.ForeignKey(Execution, on_delete=models.CASCADE, related_name="+")
    pattern = models.ForeignKey(LearnedPattern, on_delete=models.CASCADE, related_name="uses")
    similarity = models.FloatField(default=0)
    outcome = models.CharField(max_length=10, choices=PatternOutcome.choices, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["execution", "pattern"], name="memory_patternuse_unique"
            ),
            models.CheckConstraint(
                condition=models.Q(outcome__in=PatternOutcome.values),
                name="memory_patternuse_outcome_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.pattern_id} in {self.execution_id}"


class InvestigationOutcome(models.TextChoices):
    OPEN = "", "Under way"
    RESOLVED = "resolved", "Run completed after investigating"
    UNRESOLVED = "unresolved", "Run did not complete"


class Investigation(AgencyOwnedModel):
    """Extra steps a run was granted when a tool result looked wrong (empty, or an error that
    contradicts the task), and what the model found with them (seed 000 "investigations")."""

    execution = models.ForeignKey(
        Execution, on_delete=models.CASCADE, related_name="investigations"
    )
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="investigations")
    tool_name = models.CharField(max_length=200)
    tool_call_id = models.CharField(max_length=200, blank=True)
    trigger = models.CharField(max_length=20)  # "empty_result" or "error"
    tool_result = models.JSONField(default=dict, blank=True)
    started_at_step = models.PositiveIntegerField()  # model calls made when it began
    steps_granted = models.PositiveSmallIntegerField()
    steps_used = models.PositiveSmallIntegerField(default=0)
    findings = models.TextField(blank=True)
    outcome = models.CharField(max_length=12, choices=InvestigationOutcome.choices, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(
                fields=["agency", "agent", "-created_at"], name="memory_investig_agent_idx"
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(outcome__in=InvestigationOutcome.values),
                name="memory_investigation_outcome_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tool_name}: {self.trigger}"
