"""One agent's tool configuration over REST: its patterns and limits, and for each of the
agency's tools whether the agent's runs are offered it (the runtime's own decision) and why not;
changing it is a change of the agent (a new version, ``ai.agent.updated``)."""

from __future__ import annotations

from typing import Any

import pytest

from agents.models import Agent, AgentVersion
from core import tenancy
from core.models import Event, Role
from tests.agents.factories import AgentFactory
from tests.api.conftest import Tenant, count, fields_of
from tests.tools.factories import McpServerFactory, ToolFactory
from tools.selectors import active_tools, agency_enabled_modules, offered_tools


def _url(agent: Agent) -> str:
    return f"/api/v1/agents/{agent.id}/tools/"


def _agent(tenant: Tenant, **fields: Any) -> Agent:
    return AgentFactory.create(agency=tenant.agency, site=tenant.site, **fields)


def test_the_configuration_says_which_tools_are_offered_and_why_not(
    tenant_a, tenant_b, as_role
) -> None:
    agent = _agent(tenant_a, allowed_tools=["crm_*", "email_send"], denied_tools=["crm_update_*"])
    own = ToolFactory.create(agency=tenant_a.agency)  # no handler installed
    theirs = ToolFactory.create(agency=tenant_b.agency)
    body = as_role(Role.VIEWER).get(_url(agent)).json()
    assert body["allowed_tools"] == ["crm_*", "email_send"]
    assert body["denied_tools"] == ["crm_update_*"]
    tools = {t["name"]: t for t in body["tools"]}
    assert tools["crm_get_contact"]["offered"] is True
    assert tools["email_send"]["offered"] is True
    assert tools["crm_update_contact"]["offered"] is False
    assert tools["crm_update_contact"]["code"] == "tool_not_allowed"
    assert "crm_update_*" in tools["crm_update_contact"]["reason"]
    assert tools["web_search"]["code"] == "tool_not_allowed"
    assert tools[own.name]["code"] == "not_installed"
    assert theirs.name not in tools


def test_the_tools_of_an_mcp_server_are_offered_as_the_runs_offer_them(tenant_a, as_role) -> None:
    server = McpServerFactory.create(agency=tenant_a.agency)
    mcp_tool = ToolFactory.create(
        agency=tenant_a.agency,
        mcp_server=server,
        name=f"mcp_{server.slug}__get_forecast",
        handler_config={"mcp_tool": "get_forecast"},
    )
    agent = _agent(tenant_a, allowed_tools=["mcp_*"], denied_tools=[])
    tools = {t["name"]: t for t in as_role(Role.VIEWER).get(_url(agent)).json()["tools"]}
    assert tools[mcp_tool.name]["offered"] is True, tools[mcp_tool.name]
    assert tools[mcp_tool.name]["code"] == ""
    with tenancy.agency_context(tenant_a.agency.id):
        runs_offer = offered_tools(
            active_tools(tenant_a.agency.id),
            allowed=agent.allowed_tools,
            denied=agent.denied_tools,
            enabled_modules=agency_enabled_modules(tenant_a.agency.id),
        )
    assert {t["name"] for t in tools.values() if t["offered"]} == {t.name for t in runs_offer}


def test_staff_change_the_patterns_and_limits_as_a_new_version(tenant_a, as_role) -> None:
    agent = _agent(tenant_a)
    response = as_role(Role.STAFF).patch(
        _url(agent),
        {"allowed_tools": ["email_*"], "denied_tools": [], "max_tool_calls_per_step": 2},
        format="json",
    )
    assert response.status_code == 200, response.json()
    tools = {t["name"]: t for t in response.json()["tools"]}
    assert tools["email_send"]["offered"] is True
    assert tools["crm_get_contact"]["offered"] is False
    with tenancy.agency_context(tenant_a.agency.id):
        agent.refresh_from_db()
        assert agent.allowed_tools == ["email_*"]
        assert agent.max_tool_calls_per_step == 2
        assert AgentVersion.objects.filter(agent=agent).count() == 1
        updated = Event.objects.get(event_type="ai.agent.updated")
    assert set(updated.payload["changes"]) == {"allowed_tools", "max_tool_calls_per_step"}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"allowed_tools": ["crm delete"]}, "allowed_tools"),
        ({"denied_tools": ["CRM_*"]}, "denied_tools"),
        ({"allowed_tools": "crm_*"}, "allowed_tools"),
        ({"max_tool_calls_per_step": 0}, "max_tool_calls_per_step"),
        ({"max_tool_calls_per_step": 2_763_378_472}, "max_tool_calls_per_step"),
        ({"max_corrections": 101}, "max_corrections"),
        ({"allowed_tools": ["email_*"], "system_prompt": "x"}, "system_prompt"),
    ],
)
def test_bad_configuration_is_400_and_nothing_written(tenant_a, as_role, body, field) -> None:
    agent = _agent(tenant_a)
    response = as_role(Role.STAFF).patch(_url(agent), body, format="json")
    errors = fields_of(response)
    assert field in errors
    assert response.json()["message"].startswith("Invalid input.")
    with tenancy.agency_context(tenant_a.agency.id):
        agent.refresh_from_db()
    assert agent.allowed_tools == ["crm_*"]
    assert count(Event, event_type="ai.agent.updated") == 0


def test_another_agencys_agent_is_a_404(tenant_a, tenant_b, as_role) -> None:
    theirs = _agent(tenant_b)
    client = as_role(Role.ADMIN)
    assert client.get(_url(theirs)).status_code == 404
    response = client.patch(_url(theirs), {"allowed_tools": ["*"]}, format="json")
    assert response.status_code == 404
    with tenancy.agency_context(tenant_b.agency.id):
        theirs.refresh_from_db()
    assert theirs.allowed_tools == ["crm_*"]
    assert as_role(Role.ADMIN).get("/api/v1/agents/not-a-uuid/tools/").status_code == 404


@pytest.mark.parametrize("role", [Role.APPROVER, Role.VIEWER])
def test_approvers_and_viewers_only_read_it(tenant_a, as_role, role) -> None:
    agent = _agent(tenant_a)
    client = as_role(role)
    assert client.get(_url(agent)).status_code == 200
    assert client.patch(_url(agent), {"allowed_tools": ["*"]}, format="json").status_code == 403


def test_both_endpoints_name_each_bad_pattern_alike(tenant_a, as_role) -> None:
    """The agent's PATCH and its tools' PATCH check patterns with one validator: each bad
    entry's message, in order, under the field."""
    agent = _agent(tenant_a)
    body = {"allowed_tools": ["crm_*", "crm delete", "CRM_**"], "denied_tools": ["a**"]}
    client = as_role(Role.STAFF)
    by_tools = fields_of(client.patch(_url(agent), body, format="json"))
    by_agent = fields_of(client.patch(f"/api/v1/agents/{agent.id}/", body, format="json"))
    assert by_tools == by_agent
    assert by_tools["allowed_tools"] == [
        "Tool pattern 'crm delete' contains whitespace; remove the spaces.",
        "Tool pattern 'CRM_**' contains 'CMR': use lower-case letters, digits, '_' and '*' "
        "(any run of characters), e.g. 'crm_*' or '*_send'.",
    ]
    assert by_tools["denied_tools"] == [
        "Tool pattern 'a**' contains '**'; a single '*' already matches any run of characters."
    ]
