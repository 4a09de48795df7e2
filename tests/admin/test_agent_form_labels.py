"""The agent editor reads as a form for people (issue 27): labels say what a field is and its
unit ("Active", "Timeout (seconds)", not "Is active", "Timeout seconds"), a list of names is
written as people write one ("a, b"), an empty JSON list is an empty box (not "[]"), and the
runs' tool calls are "Tool calls" wherever the admin names them, and the trigger log counts
entries, not "trigger logs"."""

from __future__ import annotations

import html
import re
from collections.abc import Callable

import pytest
from django.test import Client

from agents.models import Agent, Execution, TriggerLog
from core import tenancy
from core.models import Agency, Site, User
from tests.admin.helpers import admin_url, change_url
from tests.admin.test_agent_admin import agent_form
from tests.agents.factories import AgentFactory, ExecutionFactory, TriggerLogFactory
from tests.browser.test_admin_labels import raw_labels

pytestmark = pytest.mark.django_db

# What the page said before (the review's screenshots), and what it says now.
RAW = [
    "Is active", "Is public", "Avg response time ms", "Timeout seconds", "Human timeout minutes",
    "Conversation ttl hours", "Stuck after seconds", "Is recurring", "Is achieved",
]  # fmt: skip
NAMED = [
    "Active", "Public", "Average response time (ms)", "Timeout (seconds)",
    "Human timeout (minutes)", "Conversation TTL (hours)", "Stuck after (seconds)", "Recurring",
    "Achieved", "LLM provider", "LLM model", "Avatar URL",
]  # fmt: skip


@pytest.fixture
def client(staff: User, login: Callable[[User], Client]) -> Client:
    return login(staff)


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>|\s+", " ", fragment)).replace(" *", "").strip()


def labels_on(page: str) -> list[str]:
    return [_text(label) for label in re.findall(r"<label[^>]*>(.*?)</label>", page, re.DOTALL)]


def _agent(agency: Agency) -> Agent:
    with tenancy.agency_context(agency.id):
        return AgentFactory.create(
            agency=agency, capabilities=["lead_qualification", "email_drafting"], examples=[]
        )


def test_agent_editor_labels_are_words_with_their_units(client: Client, agency: Agency) -> None:
    labels = labels_on(client.get(change_url(_agent(agency))).content.decode())
    assert [label for label in RAW if label in labels] == []
    assert [label for label in NAMED if label not in labels] == []
    assert raw_labels(labels) == []


def test_agent_editor_shows_names_comma_spaced_and_no_empty_json_list(
    client: Client, agency: Agency
) -> None:
    page = client.get(change_url(_agent(agency))).content.decode()
    capabilities = re.search(r'<input[^>]*name="capabilities"[^>]*>', page)
    assert capabilities is not None
    assert 'value="lead_qualification, email_drafting"' in capabilities.group()
    boxes = dict(re.findall(r'<textarea[^>]*name="(examples|constraints)"[^>]*>([^<]*)<', page))
    assert {name: text.strip() for name, text in boxes.items()} == {
        "examples": "",
        "constraints": "",
    }


def test_agent_saved_with_empty_json_boxes_and_spaced_names_keeps_lists(
    client: Client, agency: Agency, site: Site
) -> None:
    data = agent_form(site, examples="", constraints="", capabilities="scoring,  e-mail ")
    response = client.post(admin_url(Agent, "add"), data)
    assert response.status_code == 302, labels_on(response.content.decode())
    with tenancy.agency_context(agency.id):
        agent = Agent.objects.get(slug="lead-qualifier")
    assert (agent.examples, agent.constraints, agent.capabilities) == (
        [],
        [],
        ["scoring", "e-mail"],
    )


def test_agent_editor_draws_one_row_of_tabs_with_the_goals_in_it(
    client: Client, agency: Agency
) -> None:
    page = client.get(change_url(_agent(agency))).content.decode()
    # unfold's row of inline tabs ("General | Goals") is gone; the goals are one of the tabs.
    assert "activeTab = 'goals'" not in page
    assert 'id="tabs-wrapper"' not in page
    tabs = re.findall(r"x-on:click=\"activeFieldsetTab = '([^']+)'\"", page)
    assert tabs[:2] == ["identity-prompt", "goals"]
    assert "x-show=\"activeFieldsetTab == 'goals'\"" in page


def test_runs_name_their_tool_and_model_calls_in_words(client: Client, agency: Agency) -> None:
    with tenancy.agency_context(agency.id):
        execution = ExecutionFactory.create(agent=_agent(agency), tool_call_count=2)
    listed = client.get(admin_url(Execution, "changelist")).content.decode()
    headers = [_text(h) for h in re.findall(r"<th[^>]*>(.*?)</th>", listed, re.DOTALL)]
    assert "Tool calls" in headers
    page = client.get(change_url(execution)).content.decode()
    assert "Tool call count" not in listed + page
    assert "Llm call count" not in listed + page


def test_a_goal_with_an_error_opens_the_goals_tab(client: Client, site: Site) -> None:
    data = agent_form(
        site, **{"goals-TOTAL_FORMS": "1", "goals-0-name": "", "goals-0-priority": "5"}
    )
    response = client.post(admin_url(Agent, "add"), data)
    assert response.status_code == 200
    assert "activeFieldsetTab: 'goals'" in response.content.decode()


def test_the_trigger_log_counts_its_entries(client: Client, agency: Agency) -> None:
    with tenancy.agency_context(agency.id):
        agent = _agent(agency)
        TriggerLogFactory.create(agent=agent)
        TriggerLogFactory.create(agent=agent)
    page = client.get(admin_url(TriggerLog, "changelist")).content.decode()
    assert "2 trigger log entries" in _text(page)
    assert "trigger logs" not in page.lower()
