"""Agent templates: the five agent types of seed 004 as platform templates, and an agency's own."""

from __future__ import annotations

from django.db import models

from agents.models.agent import AgentConfig
from core.models import AgencyOwnedModel


class AgentTemplate(AgentConfig, AgencyOwnedModel):
    """A starting point for a new agent ("create from template").

    The five agent types of seed 004 are platform templates (``agency`` NULL, ``is_system``),
    seeded by a data migration and readable by every agency (``core.rls.allow_read_shared_rows``);
    an agency may keep its own templates next to them. A separate model rather than an
    ``is_template`` flag on :class:`Agent`: a template belongs to no site, is never triggered and
    has no stats, and platform templates need a NULL agency that agents must never have.
    """

    agency = models.ForeignKey(  # type: ignore[assignment]
        "core.Agency", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    slug = models.SlugField(max_length=100)
    is_system = models.BooleanField(default=False)
    # Goal definitions as AgentGoal field dicts; "create from template" turns them into rows.
    goals = models.JSONField(default=list, blank=True)
    # Seed example keys with no column: managed agents, delegation rules, report templates, ...
    extra_config = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["agent_type", "name"]
        constraints = [
            *AgentConfig.Meta.constraints,
            models.UniqueConstraint(
                fields=["agency", "slug"],
                nulls_distinct=False,
                name="agents_agenttemplate_unique_slug",
            ),
            models.CheckConstraint(
                condition=models.Q(is_system=True, agency__isnull=True)
                | models.Q(is_system=False, agency__isnull=False),
                name="agents_agenttemplate_system_iff_platform",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.agent_type} template)"
