"""The agent editor: its settings in tabs (every field in one), the tool patterns picked from the
registry with a live preview of the tools they allow, and "Try it", which starts a run and opens
it."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.admin.utils import flatten_fieldsets
from django.test import Client
from django.utils.text import slugify

from agents.admin.agent import STATS, STATS_FIELDS, AgentAdmin
from agents.models import Agent, Execution, TriggerType
from core import tenancy
from core.models import Agency, Role, Site, User
from tests.admin.conftest import member
from tests.admin.helpers import admin_url, change_url
from tests.admin.test_agent_admin import agent_count, agent_form
from tests.agents.factories import AgentFactory
from tests.tools.factories import ToolFactory

pytestmark = pytest.mark.django_db

TABS = [
    "Identity & prompt",
    "Model",
    "Tools & policies",
    "Triggers & inputs",
    "Limits & budget",
    "People in the loop",
    "Memory",
    "Flow, teams and learning",
]
PREVIEW = admin_url(Agent, "tool_preview")
# What the editor showed as one long form, before the tabs: each keeps a home.
SINGLE_FORM = [
    "name", "slug", "site", "agent_type", "domain", "description", "avatar_url", "capabilities",
    "is_active", "is_public", "personality", "system_prompt", "constraints", "examples",
    "allowed_tools", "denied_tools", "effective_tools_display", "llm_provider", "llm_model",
    "temperature", "max_tokens", "max_steps_per_run", "max_tool_calls_per_step",
    "timeout_seconds", "max_runs_per_hour", "max_runs_per_day", "trigger_events",
    "trigger_schedule", "schedule_display", "trigger_conditions", *STATS_FIELDS,
    "human_timeout_minutes", "max_corrections", "deny_may_continue",
]  # fmt: skip


@pytest.fixture
def client(staff: User, login: Callable[[User], Client]) -> Client:
    return login(staff)


def tabs_on(page: str) -> list[str]:
    """The fieldset tabs of an unfold change form, in order (their slugs)."""
    return re.findall(r"x-on:click=\"activeFieldsetTab = '([^']+)'\"", page)


def offered(fragment: str) -> list[str]:
    listed = re.search(r"<ul class='effective-tools'>(.*?)</ul>", fragment, re.DOTALL)
    return re.findall(r">([a-z_*]+)</a>", listed.group(1)) if listed else []


def left_out(fragment: str) -> dict[str, str]:
    listed = re.search(r'<ul class="left-out-tools">(.*?)</ul>', fragment, re.DOTALL)
    rows = re.findall(
        r'>([a-z_0-9]+)</a> <span class="tool-reason">([^<]*)</span>',
        listed.group(1) if listed else "",
    )
    return {name: html.unescape(reason) for name, reason in rows}


def executions(agent: Agent) -> list[Execution]:
    with tenancy.platform_context():
        return list(Execution.objects.filter(agent=agent))


# --- tabs ---------------------------------------------------------------------------------------


def test_every_field_of_the_agent_form_is_in_exactly_one_tab(rf: Any, staff: User) -> None:
    model_admin = admin.site._registry[Agent]
    assert isinstance(model_admin, AgentAdmin)
    request = rf.get("/")
    request.user, request.membership = staff, staff.membership
    agent = AgentFactory.create(agency=staff.membership.agency)
    fieldsets = model_admin.get_fieldsets(request, agent)
    assert [name for name, _ in fieldsets] == [*TABS, STATS]
    assert all(options["classes"] == ["tab"] for _, options in fieldsets)
    placed = flatten_fieldsets(fieldsets)
    assert len(placed) == len(set(placed))  # no field in two tabs
    form_fields = set(model_admin.get_form(request, agent).base_fields)
    assert form_fields <= set(placed)
    assert set(SINGLE_FORM) <= set(placed), set(SINGLE_FORM) - set(placed)


def test_the_editor_shows_its_tabs_and_goals_beside_them(client: Client, site: Site) -> None:
    agent = AgentFactory.create(agency=site.agency, site=site)
    page = client.get(change_url(agent)).content.decode()
    # The goals inline is a tab of its own, in the same row, beside the prompt's.
    with_goals = [TABS[0], "Goals", *TABS[1:]]
    assert tabs_on(page) == [slugify(name) for name in (*with_goals, STATS)]
    add_page = client.get(admin_url(Agent, "add")).content.decode()
    assert tabs_on(add_page) == [slugify(name) for name in with_goals]  # no stats before a run


def test_a_form_error_opens_the_tab_it_is_on(client: Client, site: Site) -> None:
    response = client.post(admin_url(Agent, "add"), agent_form(site, trigger_schedule="61 * * * *"))
    page = response.content.decode()
    assert response.status_code == 200
    assert "activeFieldsetTab: 'triggers-inputs'" in page
    assert "Invalid cron expression" in page
    assert agent_count(site.agency) == 0


# --- tool patterns: picker and preview ------------------------------------------------------------


def test_the_pattern_fields_offer_the_registrys_tools_and_groups(
    client: Client, site: Site, other_agency: Agency
) -> None:
    ToolFactory.create(agency=site.agency, name="crm_custom_sync")
    ToolFactory.create(agency=other_agency, name="crm_other_agency")
    agent = AgentFactory.create(agency=site.agency, site=site)
    page = client.get(change_url(agent)).content.decode()
    for field in ("id_allowed_tools", "id_denied_tools"):
        assert f'data-tool-pattern-for="{field}"' in page
    options = set(re.findall(r'<option value="([a-z_*]+)">', page))
    assert {"*", "crm_*", "email_*", "crm_get_contact", "email_send", "crm_custom_sync"} <= options
    assert "crm_other_agency" not in page


def test_the_preview_lists_what_the_typed_patterns_allow_and_why_others_are_not(
    client: Client, site: Site
) -> None:
    ToolFactory.create(agency=site.agency, name="crm_custom_sync")  # no handler installed
    response = client.get(
        PREVIEW, {"allowed_tools": "crm_*, email_*", "denied_tools": "crm_update_*,email_send"}
    )
    assert response.status_code == 200
    fragment = response.content.decode()
    assert offered(fragment) == [
        "crm_add_note",
        "crm_create_contact",
        "crm_get_contact",
        "crm_search_contacts",
        "email_draft",
    ]
    reasons = left_out(fragment)
    assert (
        reasons["email_send"]
        == "Tool 'email_send' is denied for this agent (pattern 'email_send')."
    )
    assert "crm_update_*" in reasons["crm_update_contact"]
    assert "No handler" in reasons["crm_custom_sync"]
    assert "matches none of the agent's allowed" in reasons["web_search"]
    assert "patterns as typed, not saved yet" in fragment


def test_the_preview_marks_tools_that_wait_for_an_approval(client: Client, site: Site) -> None:
    constraints = '[{"type": "require_approval", "tools": ["crm_add_*"]}]'
    fragment = client.get(
        PREVIEW, {"allowed_tools": "crm_add_note,email_send", "constraints": constraints}
    ).content.decode()
    approvals = dict(
        re.findall(r'>([a-z_]+)</a> <span class="tool-badge" title="([^"]*)">', fragment)
    )
    assert set(approvals) == {"crm_add_note", "email_send"}  # a constraint, a dangerous tool
    assert "dangerous" in approvals["email_send"]


def test_the_preview_reports_a_malformed_pattern_and_the_empty_list(
    client: Client, site: Site
) -> None:
    fragment = client.get(PREVIEW, {"allowed_tools": "crm-*", "denied_tools": ""}).content.decode()
    assert "Allowed tools: Tool pattern &#x27;crm-*&#x27; contains &#x27;-&#x27;" in fragment
    assert offered(fragment) == []
    assert "None: the allowed list is empty" in fragment


def test_the_preview_is_of_the_members_agency_whatever_the_request_names(
    client: Client, site: Site, other_agency: Agency
) -> None:
    ToolFactory.create(agency=other_agency, name="crm_other_agency")
    fragment = client.get(
        PREVIEW, {"allowed_tools": "*", "agency": str(other_agency.pk)}
    ).content.decode()
    assert "crm_other_agency" not in fragment
    assert "crm_get_contact" in offered(fragment)


def test_a_superuser_previews_the_agency_picked(
    superuser: User, login: Callable[[User], Client], other_agency: Agency
) -> None:
    ToolFactory.create(agency=other_agency, name="crm_other_agency")
    client = login(superuser)
    assert "Pick the agency first" in client.get(PREVIEW, {"allowed_tools": "*"}).content.decode()
    fragment = client.get(
        PREVIEW, {"allowed_tools": "crm_*", "agency": str(other_agency.pk)}
    ).content.decode()
    assert "crm_other_agency" in left_out(fragment)  # no handler, but listed for that agency


def test_the_saved_patterns_preview_is_refreshed_while_typing(client: Client, site: Site) -> None:
    agent = AgentFactory.create(agency=site.agency, site=site, allowed_tools=["crm_*"])
    page = client.get(change_url(agent)).content.decode()
    preview = re.search(r'<div id="tool-preview" ([^>]*)>', page)
    assert preview is not None
    assert f'hx-get="{PREVIEW}?agency={agent.agency_id}"' in preview.group(1)
    assert "from:#id_allowed_tools" in preview.group(1)
    assert "from:#id_denied_tools" in preview.group(1)
    assert "(saved patterns)" in page


# --- try it ---------------------------------------------------------------------------------------


def try_it_url(agent: Agent) -> str:
    return admin_url(Agent, "try_it", agent.pk)


def test_try_it_asks_for_an_instruction_then_starts_a_run_and_opens_it(
    client: Client, site: Site, staff: User
) -> None:
    agent = AgentFactory.create(agency=site.agency, site=site)
    assert try_it_url(agent) in client.get(change_url(agent)).content.decode()
    dialog = client.get(try_it_url(agent), headers={"HX-Request": "true"})  # as the page loads it
    assert dialog.status_code == 200
    assert 'name="input"' in dialog.content.decode()

    response = client.post(
        try_it_url(agent),
        {"_form_submitted": "on", "input": "Qualify Jane"},
        headers={"HX-Request": "true"},
    )
    [execution] = executions(agent)
    assert response.status_code == 200
    assert response["HX-Redirect"] == change_url(execution)
    assert (execution.trigger_type, execution.input) == (TriggerType.MANUAL, "Qualify Jane")
    assert execution.triggered_by_id == staff.pk


def test_try_it_without_htmx_redirects_to_the_run(client: Client, site: Site) -> None:
    agent = AgentFactory.create(agency=site.agency, site=site)
    response = client.post(try_it_url(agent), {"_form_submitted": "on", "input": ""})
    [execution] = executions(agent)
    assert response.status_code == 302
    assert response["Location"] == change_url(execution)


def test_the_try_it_dialog_opened_by_its_address_is_the_run_now_page(
    client: Client, site: Site
) -> None:
    # The dialog's form alone, opened in a tab of its own, was a page with no style.
    agent = AgentFactory.create(agency=site.agency, site=site, name="Lead qualifier")
    response = client.get(try_it_url(agent))
    assert response.status_code == 302
    assert response["Location"] == admin_url(Agent, "run", agent.pk)
    page = client.get(response["Location"]).content.decode()
    assert "Run Lead qualifier now" in page
    assert 'name="input"' in page
    assert executions(agent) == []


def test_try_it_on_an_inactive_agent_starts_nothing_and_says_why(
    client: Client, site: Site
) -> None:
    agent = AgentFactory.create(agency=site.agency, site=site, is_active=False)
    response = client.post(try_it_url(agent), {"_form_submitted": "on"}, follow=True)
    assert executions(agent) == []
    messages = [str(m) for m in response.context["messages"]]
    assert any("was not started: the agent is not active" in m for m in messages), messages


def test_a_too_long_instruction_is_a_form_error(client: Client, site: Site) -> None:
    agent = AgentFactory.create(agency=site.agency, site=site)
    response = client.post(try_it_url(agent), {"_form_submitted": "on", "input": "x" * 20_001})
    assert response.status_code == 200
    assert "at most 20000 characters" in response.content.decode()
    assert executions(agent) == []


@pytest.mark.parametrize("role", [Role.VIEWER, Role.APPROVER])
def test_a_viewer_cannot_try_an_agent(
    role: str, site: Site, login: Callable[[User], Client]
) -> None:
    agent = AgentFactory.create(agency=site.agency, site=site)
    client = login(member(site.agency, role))
    assert try_it_url(agent) not in client.get(change_url(agent)).content.decode()
    assert client.get(try_it_url(agent)).status_code == 403
    response = client.post(try_it_url(agent), {"_form_submitted": "on", "input": "go"})
    assert response.status_code == 403
    assert executions(agent) == []


def test_another_agencys_agent_cannot_be_tried(client: Client, other_agency: Agency) -> None:
    theirs = AgentFactory.create(agency=other_agency)
    response = client.post(try_it_url(theirs), {"_form_submitted": "on", "input": "go"})
    assert response.status_code == 404
    assert executions(theirs) == []
