"""Agent configuration services: validation, ai.agent.* events, duplicate and templates."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest
from django.utils import timezone

from agents.models import Agent, AgentTemplate, Execution, ExecutionStatus
from agents.services import (
    agent_activate,
    agent_create,
    agent_create_from_template,
    agent_deactivate,
    agent_delete,
    agent_duplicate,
    agent_update,
    execution_resume_due,
)
from core import tenancy
from core.exceptions import ApplicationError
from core.models import Event, Site
from tests.agents.factories import AgentFactory
from tests.factories import AgencyFactory, SiteFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def site() -> Site:
    return SiteFactory.create(agency=AgencyFactory.create())


def _events(agency_id: uuid.UUID) -> list[str]:
    return list(
        Event.objects.filter(agency_id=agency_id)
        .order_by("created_at")
        .values_list("event_type", flat=True)
    )


def test_create_update_activate_delete_emit_events(site: Site) -> None:
    with tenancy.agency_context(site.agency_id):
        agent = agent_create(
            agency_id=site.agency_id,
            site=site,
            name="Lead qualifier",
            agent_type="specialist",
            system_prompt="Qualify leads.",
        )
        assert agent.slug == "lead-qualifier"
        agent_update(agent=agent, temperature="0.20")
        agent_activate(agent=agent)
        agent_deactivate(agent=agent)
        agent_delete(agent=agent)
        assert _events(site.agency_id) == [
            "ai.agent.created",
            "ai.agent.updated",
            "ai.agent.updated",
            "ai.agent.activated",
            "ai.agent.updated",
            "ai.agent.deactivated",
            "ai.agent.deleted",
        ]


def test_invalid_patterns_and_cron_are_field_errors_and_nothing_is_written(site: Site) -> None:
    with tenancy.agency_context(site.agency_id):
        with pytest.raises(ApplicationError) as error:
            agent_create(
                agency_id=site.agency_id,
                site=site,
                name="Bad",
                agent_type="assistant",
                system_prompt="x",
                allowed_tools=["crm_**", "ok_*"],
                trigger_schedule="every day",
            )
        assert set(error.value.extra["fields"]) == {"allowed_tools", "trigger_schedule"}
        assert not Agent.objects.filter(site=site).exists()
        assert _events(site.agency_id) == []


def test_duplicate_slug_on_a_site_is_a_field_error(site: Site) -> None:
    with tenancy.agency_context(site.agency_id):
        fields: dict[str, Any] = {
            "name": "A",
            "agent_type": "assistant",
            "system_prompt": "x",
            "slug": "same",
        }
        agent_create(agency_id=site.agency_id, site=site, **fields)
        with pytest.raises(ApplicationError) as error:
            agent_create(agency_id=site.agency_id, site=site, **fields)
        assert "slug" in error.value.extra["fields"]


def test_duplicate_and_create_from_template(site: Site) -> None:
    with tenancy.agency_context(site.agency_id):
        template = AgentTemplate.objects.get(is_system=True, agent_type="guardian")
        agent = agent_create_from_template(template=template, agency_id=site.agency_id, site=site)
        assert agent.is_active is False
        assert agent.system_prompt == template.system_prompt
        assert agent.goals.count() == len([g for g in template.goals if g.get("name")])
        copy = agent_duplicate(agent=agent)
        assert copy.slug != agent.slug
        assert copy.goals.count() == agent.goals.count()


def test_a_timer_resume_leaves_a_run_whose_wait_is_not_over(site: Site) -> None:
    """beat reads its due list before it resumes each run: one resumed (and parked again) in
    between, by an overlapping tick or its own wake-up, must not be woken before its new time,
    and what it is told on waking is decided on the locked row."""
    agent = AgentFactory.create(agency=site.agency, site=site)
    now = timezone.now()
    with tenancy.agency_context(site.agency_id):
        execution = Execution.objects.create(
            agency_id=site.agency_id, agent=agent, site=site, trigger_type="manual",
            status=ExecutionStatus.WAITING_INPUT, wait_until=now + datetime.timedelta(seconds=50),
            input_request={"kind": "timer"},
        )  # fmt: skip
        stale = Execution.objects.get(pk=execution.pk)  # as the due list read it
        kept = execution_resume_due(execution, now=now)
        assert kept.status == ExecutionStatus.WAITING_INPUT
        # Parked again meanwhile, for a provider's rate limit now due.
        Execution.objects.filter(pk=execution.pk).update(
            wait_until=now, input_request={"kind": "provider_rate_limit"}
        )
        resumed = execution_resume_due(stale, now=now)
        assert resumed.status == ExecutionStatus.PENDING
        assert not resumed.steps.exists()  # a rate limit's end tells the model nothing
