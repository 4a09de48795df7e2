"""Run now, create from template, and the links from an agent to its runs and their steps."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from agents.models import (
    Agent,
    AgentGoal,
    AgentTemplate,
    Execution,
    ExecutionStep,
    TriggerLog,
    TriggerOutcome,
    TriggerType,
)
from core import tenancy
from core.models import Agency, Site, User
from tests.admin.helpers import admin_url, change_url, events
from tests.agents.factories import (
    AgentFactory,
    AgentTemplateFactory,
    ExecutionFactory,
    ExecutionStepFactory,
)
from tests.tools.factories import ToolCallFactory
from tools.models import ToolCall

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(staff: User, login: Callable[[User], Client]) -> Client:
    return login(staff)


def fetch_all(model: type[Any], **lookup: Any) -> list[Any]:
    with tenancy.platform_context():
        return list(model.objects.filter(**lookup))


def test_run_now_starts_a_manual_execution_with_the_instruction(
    client: Client, site: Site, staff: User
) -> None:
    agent = AgentFactory.create(agency=site.agency, site=site)
    assert client.get(admin_url(Agent, "run", agent.pk)).status_code == 200
    response = client.post(admin_url(Agent, "run", agent.pk), {"input": "Qualify Jane"})
    [execution] = fetch_all(Execution, agent=agent)
    assert response.status_code == 302
    assert response["Location"] == change_url(execution)
    assert (execution.trigger_type, execution.input) == (TriggerType.MANUAL, "Qualify Jane")
    assert execution.triggered_by_id == staff.pk


def test_run_now_refuses_an_instruction_longer_than_the_api_allows(
    client: Client, site: Site
) -> None:
    agent = AgentFactory.create(agency=site.agency, site=site)
    response = client.post(admin_url(Agent, "run", agent.pk), {"input": "x" * 20_001})
    assert response.status_code == 200  # the form again, with its error
    assert "at most 20000 characters" in response.content.decode()
    assert fetch_all(Execution, agent=agent) == []


def test_running_an_inactive_agent_logs_a_skipped_trigger(client: Client, site: Site) -> None:
    agent = AgentFactory.create(agency=site.agency, site=site, is_active=False)
    response = client.post(
        admin_url(Agent, "changelist"),
        {"action": "run_now", "_selected_action": [str(agent.pk)], "index": "0"},
        follow=True,
    )
    messages = [str(m) for m in response.context["messages"]]
    assert any("was not started: the agent is not active" in m for m in messages), messages
    assert fetch_all(Execution, agent=agent) == []
    [log] = fetch_all(TriggerLog, agent=agent)
    assert log.outcome == TriggerOutcome.SKIPPED


def test_run_now_starts_the_selected_agents_in_id_order(client: Client, site: Site) -> None:
    # Each start holds its agent's run-limit lock until the request commits: in id order, as
    # event dispatch takes them, two such transactions cannot deadlock.
    first, second = sorted(
        (AgentFactory.create(agency=site.agency, site=site) for _ in range(2)), key=lambda a: a.pk
    )
    for agent, name in ((first, "Zed"), (second, "Amy")):  # the changelist lists by name
        with tenancy.platform_context():
            Agent.objects.filter(pk=agent.pk).update(name=name)
    client.post(
        admin_url(Agent, "changelist"),
        {"action": "run_now", "_selected_action": [str(second.pk), str(first.pk)], "index": "0"},
    )
    with tenancy.platform_context():
        started = list(
            Execution.objects.filter(agent__in=[first, second])
            .order_by("created_at")
            .values_list("agent_id", flat=True)
        )
    assert started == [first.pk, second.pk]


def test_run_now_says_why_a_run_was_not_started(client: Client, site: Site) -> None:
    agent = AgentFactory.create(agency=site.agency, site=site)
    with tenancy.platform_context():
        Site.objects.filter(pk=site.pk).update(is_active=False)
    response = client.post(
        admin_url(Agent, "changelist"),
        {"action": "run_now", "_selected_action": [str(agent.pk)], "index": "0"},
        follow=True,
    )
    messages = [str(m) for m in response.context["messages"]]
    assert any("was not started: the agent's site is not active" in m for m in messages), messages
    assert fetch_all(Execution, agent=agent) == []


def test_create_from_a_platform_template(client: Client, site: Site) -> None:
    [template] = fetch_all(AgentTemplate, is_system=True, agent_type="specialist")
    page = client.get(admin_url(Agent, "from_template"), {"template": str(template.pk)})
    assert page.status_code == 200
    response = client.post(
        admin_url(Agent, "from_template"),
        {"template": str(template.pk), "site": str(site.pk), "name": "Inbound SDR", "slug": ""},
    )
    [agent] = fetch_all(Agent, site=site)
    assert response.status_code == 302
    assert response["Location"] == change_url(agent)
    assert (agent.name, agent.slug, agent.template_id) == (
        "Inbound SDR",
        "inbound-sdr",
        template.pk,
    )
    assert agent.is_active is False
    assert agent.system_prompt == template.system_prompt
    assert len(fetch_all(AgentGoal, agent=agent)) == len(template.goals)
    assert events(site.agency_id) == ["ai.agent.created"]

    again = {"template": str(template.pk), "site": str(site.pk), "slug": "inbound-sdr"}
    response = client.post(admin_url(Agent, "from_template"), again)
    assert response.status_code == 200
    assert "already exists on this site" in response.content.decode()
    assert len(fetch_all(Agent, site=site)) == 1


def test_another_agencys_template_cannot_be_used(
    client: Client, site: Site, other_agency: Agency
) -> None:
    theirs = AgentTemplateFactory.create(agency=other_agency)
    page = client.get(admin_url(Agent, "from_template")).content.decode()
    assert str(theirs.pk) not in page
    response = client.post(
        admin_url(Agent, "from_template"), {"template": str(theirs.pk), "site": str(site.pk)}
    )
    assert response.status_code == 200
    assert fetch_all(Agent, site=site) == []


def test_template_action_opens_create_from_template(client: Client, agency: Agency) -> None:
    template = AgentTemplateFactory.create(agency=agency)
    response = client.post(
        admin_url(AgentTemplate, "changelist"),
        {"action": "create_agent", "_selected_action": [str(template.pk)], "index": "0"},
    )
    assert response.status_code == 302
    assert response["Location"] == f"{admin_url(Agent, 'from_template')}?template={template.pk}"


def test_agent_links_to_its_executions_and_an_execution_to_its_steps_and_tool_calls(
    client: Client, site: Site
) -> None:
    agent = AgentFactory.create(agency=site.agency, site=site)
    other = AgentFactory.create(agency=site.agency, site=site)
    execution = ExecutionFactory.create(agent=agent)
    ExecutionFactory.create(agent=other)
    steps = [
        ExecutionStepFactory.create(execution=execution, step_number=n, tool_name=f"tool_{n}")
        for n in (2, 1, 3)
    ]
    call = ToolCallFactory.create(execution=execution, step=steps[0])

    agent_page = client.get(change_url(agent)).content.decode()
    executions_url = f"{admin_url(Execution, 'changelist')}?agent__id__exact={agent.pk}"
    assert executions_url in agent_page
    listed = client.get(executions_url).content.decode()
    assert change_url(execution) in listed
    assert re.search(r"\b1\s+execution\b", listed)  # the changelist's count

    # The run page's steps are its live timeline (drawn from its socket); their rows and the
    # tool calls are under its Related links, filtered to the run (it repeated them in admin
    # tables until issue 27).
    page = client.get(change_url(execution)).content.decode()
    steps_url = f"{admin_url(ExecutionStep, 'changelist')}?execution__id__exact={execution.pk}"
    calls_url = f"{admin_url(ToolCall, 'changelist')}?execution__id__exact={execution.pk}"
    assert steps_url in page
    assert calls_url in page
    listed_steps = client.get(steps_url).content.decode()
    positions = [
        listed_steps.index(change_url(step)) for step in sorted(steps, key=lambda s: s.step_number)
    ]
    assert positions == sorted(positions)  # steps in order
    assert change_url(call) in client.get(calls_url).content.decode()

    step_page = client.get(change_url(steps[0])).content.decode()
    assert change_url(call) in step_page
    assert change_url(execution) in step_page
