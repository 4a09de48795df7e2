"""A canary row for the admin's tests (tests/admin/rows.py): an agent with two versions, the
second current, and a running canary of the first."""

from __future__ import annotations

from agents.models import Agent, AgentVersion
from core import tenancy
from core.models import Agency
from evals.models import Canary
from tests.agents.factories import AgentFactory


def canary_row(agency: Agency) -> Canary:
    agent: Agent = AgentFactory.create(agency=agency)
    with tenancy.platform_context():
        old, current = (
            AgentVersion.objects.create(
                agency=agency, agent=agent, number=n, config={"system_prompt": f"Version {n}."}
            )
            for n in (1, 2)
        )
        Agent.objects.filter(pk=agent.pk).update(current_version=current)
        return Canary.objects.create(agency=agency, agent=agent, candidate=old, stable=current)
