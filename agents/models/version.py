"""Agent versions (issue 16): every save that changes an agent's configuration is kept, immutable,
and each run records the version it started with."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models

from agents.models.agent import Agent, AgentConfig
from core.models import AgencyOwnedModel

# What a version holds: the fields of AgentConfig, the part of an agent a run depends on (prompt,
# model, tools and policies, limits, triggers, people in the loop). Not identity (slug, site,
# template), not switches (is_active, is_public: turning an agent off is not a new
# configuration) and not stats. Goals are rows of their own, with progress a run moves; a run
# keeps the goals it started with in its rendered system prompt (Execution.config_snapshot).
VERSIONED_FIELDS: tuple[str, ...] = tuple(f.name for f in AgentConfig._meta.concrete_fields)


class AgentVersion(AgencyOwnedModel):
    """One saved configuration of an agent, numbered 1, 2, ... per agent; never changed once
    written (a trigger refuses an UPDATE of its content, migration agents 0017)."""

    # Not indexed on its own: the (agent, number) unique index serves every lookup by agent.
    agent = models.ForeignKey(
        Agent, on_delete=models.CASCADE, related_name="versions", db_index=False
    )
    number = models.PositiveIntegerField()
    # The VERSIONED_FIELDS values, in their JSON form (agents.services.versions.config_of).
    config = models.JSONField()
    # The configuration fields this version changed from the one before (empty for version 1).
    change_summary = ArrayField(models.CharField(max_length=100), default=list, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    # Set when a person restored an earlier version: this one holds that version's config.
    restored_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["agent", "-number"]
        constraints = [
            models.UniqueConstraint(
                fields=["agent", "number"], name="agents_agentversion_unique_number"
            ),
            # The target of (version, agent) foreign keys: a run's version and an agent's
            # current version are versions of that same agent (migration agents 0017).
            models.UniqueConstraint(fields=["id", "agent"], name="agents_agentversion_id_agent"),
            models.CheckConstraint(
                condition=models.Q(number__gt=0), name="agents_agentversion_number_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"version {self.number}"
