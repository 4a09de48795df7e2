"""The agent page saves through the agent services: validation errors land on the form, events
are emitted, and the computed parts (effective tools, schedule) are right."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from django_celery_beat.models import PeriodicTask

from agents.models import Agent, AgentGoal
from agents.schedules import periodic_task_name
from core import tenancy
from core.models import Agency, Role, Site, User
from tests.admin.conftest import member
from tests.admin.helpers import admin_url, change_url, events
from tests.agents.factories import AgentFactory, ExecutionFactory
from tests.factories import SiteFactory
from tests.tools.factories import ToolFactory

pytestmark = pytest.mark.django_db


def agent_form(site: Site, **overrides: str) -> dict[str, str]:
    data = {
        "name": "Lead qualifier",
        "slug": "lead-qualifier",
        "site": str(site.pk),
        "agent_type": "specialist",
        "domain": "sales",
        "system_prompt": "Qualify new leads.",
        "constraints": "[]",
        "examples": "[]",
        "allowed_tools": "crm_*",
        "denied_tools": "",
        "llm_provider": "openai",
        "llm_model": "gpt-4o-mini",
        "temperature": "0.50",
        "max_tokens": "1000",
        "max_steps_per_run": "10",
        "max_tool_calls_per_step": "3",
        "timeout_seconds": "120",
        "max_runs_per_hour": "60",
        "max_runs_per_day": "500",
        "human_timeout_minutes": "1440",
        "max_corrections": "3",
        "understanding_threshold": "0.70",
        "memory_token_budget": "800",
        "context_token_budget": "32000",
        "conversation_window": "12",
        "conversation_ttl_hours": "24",
        "loop_threshold": "3",
        "loop_action": "stop",
        "stuck_after_seconds": "600",
        "stuck_action": "notify",
        "delegate_agents": "",
        "denied_delegate_agents": "",
        "learning_enabled": "on",
        "quality_threshold": "0.80",
        "investigation_max_steps": "0",
        "trigger_events": "",
        "trigger_schedule": "",
        "trigger_conditions": "{}",
        "goals-TOTAL_FORMS": "0",
        "goals-INITIAL_FORMS": "0",
        "goals-MIN_NUM_FORMS": "0",
        "goals-MAX_NUM_FORMS": "1000",
    }
    return {**data, **overrides}


def agent_count(agency: Agency) -> int:
    with tenancy.platform_context():
        return Agent.objects.filter(agency=agency).count()


def get_agent(**lookup: Any) -> Agent:
    with tenancy.platform_context():
        return Agent.objects.get(**lookup)


@pytest.fixture
def client(staff: User, login: Callable[[User], Client]) -> Client:
    return login(staff)


def test_staff_creates_an_agent_with_goals_through_the_services(
    client: Client, site: Site, staff: User
) -> None:
    data = agent_form(
        site,
        **{
            "goals-TOTAL_FORMS": "1",
            "goals-0-name": "Qualify 20 leads a week",
            "goals-0-priority": "8",
            "goals-0-is_recurring": "on",
        },
    )
    response = client.post(admin_url(Agent, "add"), data)
    assert response.status_code == 302, response.content.decode()[:2000]
    agent = get_agent(site=site, slug="lead-qualifier")
    assert agent.agency_id == site.agency_id
    assert agent.created_by_id == staff.pk
    with tenancy.platform_context():
        goal = AgentGoal.objects.get(agent=agent)
    assert (goal.name, goal.priority, goal.agency_id) == (
        "Qualify 20 leads a week",
        8,
        agent.agency_id,
    )
    assert events(site.agency_id) == ["ai.agent.created"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"allowed_tools": "crm-*"}, "contains &#x27;-&#x27;"),
        ({"denied_tools": "email_**"}, "contains &#x27;**&#x27;"),
        ({"trigger_schedule": "61 * * * *"}, "Invalid cron expression"),
        ({"trigger_schedule": "every day"}, "A cron expression has 5 fields"),
    ],
)
def test_invalid_patterns_and_cron_are_form_errors(
    client: Client, site: Site, overrides: dict[str, str], message: str
) -> None:
    response = client.post(admin_url(Agent, "add"), agent_form(site, **overrides))
    assert response.status_code == 200
    assert message in response.content.decode()
    assert "errorlist" in response.content.decode()
    assert agent_count(site.agency) == 0
    assert events(site.agency_id) == []


def test_duplicate_slug_on_the_same_site_is_a_form_error(client: Client, site: Site) -> None:
    AgentFactory.create(agency=site.agency, site=site, slug="lead-qualifier")
    response = client.post(admin_url(Agent, "add"), agent_form(site))
    assert response.status_code == 200
    assert "already exists" in response.content.decode()
    assert agent_count(site.agency) == 1

    other_site = SiteFactory.create(agency=site.agency)
    response = client.post(admin_url(Agent, "add"), agent_form(other_site))
    assert response.status_code == 302
    assert agent_count(site.agency) == 2


def test_superuser_creates_an_agent_in_the_agency_they_pick(
    superuser: User, login: Callable[[User], Client], site: Site
) -> None:
    data = agent_form(site, agency=str(site.agency_id))
    response = login(superuser).post(admin_url(Agent, "add"), data)
    assert response.status_code == 302
    assert get_agent(slug="lead-qualifier").agency_id == site.agency_id
    assert events(site.agency_id) == ["ai.agent.created"]


def test_editing_emits_events_syncs_the_schedule_and_describes_it(
    client: Client, site: Site
) -> None:
    agent = AgentFactory.create(agency=site.agency, site=site, slug="lead-qualifier")
    data = agent_form(site, is_active="on", temperature="0.20", trigger_schedule="0 9 * * 1-5")
    response = client.post(change_url(agent), data)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert events(site.agency_id) == ["ai.agent.updated"]
    assert PeriodicTask.objects.filter(name=periodic_task_name(agent)).exists()

    page = client.get(change_url(agent)).content.decode()
    assert "At 09:00, Monday through Friday. Next run: " in page


def test_deactivating_on_the_form_emits_its_event(client: Client, site: Site) -> None:
    agent = AgentFactory.create(agency=site.agency, site=site, slug="lead-qualifier")
    response = client.post(change_url(agent), agent_form(site))  # is_active unchecked
    assert response.status_code == 302
    assert get_agent(pk=agent.pk).is_active is False
    assert events(site.agency_id) == ["ai.agent.updated", "ai.agent.deactivated"]


def _action(client: Client, action: str, *agents: Agent) -> Any:
    return client.post(
        admin_url(Agent, "changelist"),
        {"action": action, "_selected_action": [str(a.pk) for a in agents], "index": "0"},
    )


def test_activate_deactivate_and_duplicate_actions(client: Client, site: Site) -> None:
    agent = AgentFactory.create(agency=site.agency, site=site, is_active=False)

    assert _action(client, "activate", agent).status_code == 302
    assert get_agent(pk=agent.pk).is_active is True
    assert _action(client, "deactivate", agent).status_code == 302
    assert get_agent(pk=agent.pk).is_active is False
    assert _action(client, "duplicate", agent).status_code == 302

    copy = get_agent(name=f"{agent.name} (copy)")
    assert copy.is_active is False
    assert copy.slug == f"{agent.slug}-copy"
    assert events(site.agency_id) == [
        "ai.agent.updated",
        "ai.agent.activated",
        "ai.agent.updated",
        "ai.agent.deactivated",
        "ai.agent.created",
    ]


def test_viewer_gets_no_actions_and_cannot_change(
    login: Callable[[User], Client], site: Site
) -> None:
    agent = AgentFactory.create(agency=site.agency, site=site, is_active=False)
    viewer = login(member(site.agency, Role.VIEWER))
    assert viewer.get(change_url(agent)).status_code == 200
    assert viewer.post(change_url(agent), agent_form(site)).status_code == 403
    assert viewer.get(admin_url(Agent, "run", agent.pk)).status_code == 403
    _action(viewer, "activate", agent)
    assert get_agent(pk=agent.pk).is_active is False
    assert events(site.agency_id) == []


def test_another_agencys_agent_is_404_everywhere(client: Client, other_agency: Agency) -> None:
    theirs = AgentFactory.create(agency=other_agency)
    for action in ("change", "delete", "history", "run"):
        assert client.get(admin_url(Agent, action, theirs.pk)).status_code == 404
    assert client.post(admin_url(Agent, "run", theirs.pk)).status_code == 404
    _action(client, "deactivate", theirs)
    assert get_agent(pk=theirs.pk).is_active is True


def test_deleting_an_agent_with_runs_goes_through_the_service(client: Client, site: Site) -> None:
    agent = AgentFactory.create(agency=site.agency, site=site)
    ExecutionFactory.create(agent=agent)
    response = client.post(admin_url(Agent, "delete", agent.pk), {"post": "yes"})
    assert response.status_code == 302
    assert agent_count(site.agency) == 0
    assert events(site.agency_id) == ["ai.agent.deleted"]


def test_effective_tools_lists_active_visible_tools_allowed_and_not_denied(
    client: Client, site: Site, other_agency: Agency
) -> None:
    ToolFactory.create(agency=site.agency, name="crm_custom_sync")  # no handler: never offered
    ToolFactory.create(agency=site.agency, name="crm_retired", is_active=False)
    ToolFactory.create(agency=other_agency, name="crm_other_agency")
    agent = AgentFactory.create(
        agency=site.agency,
        site=site,
        allowed_tools=["crm_*", "email_*"],
        denied_tools=["crm_update_*", "email_send"],
    )
    page = client.get(change_url(agent)).content.decode()
    listed = re.search(r"<ul class='effective-tools'>(.*?)</ul>", page, re.DOTALL)
    assert listed is not None
    assert re.findall(r">([a-z_]+)</a>", listed.group(1)) == [
        "crm_add_note",
        "crm_create_contact",
        "crm_get_contact",
        "crm_search_contacts",
        "email_draft",
    ]


def test_effective_tools_leave_out_tools_missing_a_permission_or_an_enabled_module(
    client: Client, site: Site
) -> None:
    """The page shows what a run is offered: required permissions and modules count too."""
    ToolFactory.create(agency=site.agency, name="crm_export", requires_permissions=["crm_bulk"])
    ToolFactory.create(agency=site.agency, name="crm_invoice", requires_modules=["accounting"])
    agent = AgentFactory.create(
        agency=site.agency, site=site, allowed_tools=["crm_*"], denied_tools=["crm_bulk"]
    )
    page = client.get(change_url(agent)).content.decode()
    listed = re.search(r"<ul class='effective-tools'>(.*?)</ul>", page, re.DOTALL)
    assert listed is not None
    names = re.findall(r">([a-z_]+)</a>", listed.group(1))
    assert "crm_get_contact" in names
    assert "crm_export" not in names
    assert "crm_invoice" not in names


def test_an_agent_with_no_allowed_tools_says_it_cannot_act(client: Client, site: Site) -> None:
    agent = AgentFactory.create(agency=site.agency, site=site, allowed_tools=[])
    page = client.get(change_url(agent)).content.decode()
    assert "None: the allowed list is empty" in page
