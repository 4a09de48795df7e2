"""An agent's goals with their success criteria (seed 004 ``ai_agent_goals``)."""

from __future__ import annotations

from django.db import models

from agents.models.agent import Agent
from core.models import AgencyOwnedModel


class Comparison(models.TextChoices):
    GT = "gt", ">"
    GTE = "gte", "≥"
    LT = "lt", "<"
    LTE = "lte", "≤"
    EQ = "eq", "="


class AgentGoal(AgencyOwnedModel):
    """One goal of an agent with its success criterion (seed 004 ``ai_agent_goals``)."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="goals")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    priority = models.PositiveSmallIntegerField(default=5)  # 1-10, higher = more important

    success_metric = models.CharField(max_length=100, blank=True)  # "conversion_rate", ...
    target_value = models.DecimalField(max_digits=12, decimal_places=4, null=True, blank=True)
    comparison = models.CharField(max_length=3, choices=Comparison.choices, blank=True)

    is_recurring = models.BooleanField("recurring", default=True)
    deadline = models.DateTimeField(null=True, blank=True)

    current_value = models.DecimalField(max_digits=12, decimal_places=4, null=True, blank=True)
    is_achieved = models.BooleanField("achieved", default=False)
    achieved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-priority", "created_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(priority__gte=1, priority__lte=10),
                name="agents_agentgoal_priority_range",
            ),
            models.CheckConstraint(
                condition=models.Q(comparison__in=[*Comparison.values, ""]),
                name="agents_agentgoal_comparison_valid",
            ),
        ]

    def __str__(self) -> str:
        return self.name
