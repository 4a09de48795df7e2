"""The agent page refuses triggers that could never fire on the field (never a 500), accepts
valid trigger conditions, and says what the conditions look like."""

from __future__ import annotations

import html
import json
from collections.abc import Callable

import pytest
from django.test import Client

from agents.models import Agent
from core import tenancy
from core.models import Site, User
from tests.admin.helpers import admin_url, events
from tests.admin.test_agent_admin import agent_count, agent_form

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(staff: User, login: Callable[[User], Client]) -> Client:
    return login(staff)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"trigger_schedule": "1,,2 * * * *"}, "Invalid cron expression"),
        ({"trigger_events": "CRM Contact Created"}, "is not an event type"),
        ({"trigger_events": "crm.contact.created, *"}, "may only end a subscription"),
        ({"trigger_conditions": '{"source": {"is": "web"}}'}, "use a dotted key"),
        ({"trigger_conditions": '["web"]'}, "Must be a JSON object"),
        ({"trigger_conditions": '{"source": []}'}, "never matches"),
        ({"input_schema": '{"type": "object"}'}, 'Name the inputs under "properties".'),
        (
            {"input_schema": '{"type": "object", "properties": {"_via": {}}}'},
            "names starting with _ are the platform's",
        ),
    ],
)
def test_triggers_that_could_never_fire_are_form_errors(
    client: Client, site: Site, overrides: dict[str, str], message: str
) -> None:
    response = client.post(admin_url(Agent, "add"), agent_form(site, **overrides))
    assert response.status_code == 200
    page = html.unescape(response.content.decode())
    assert message in page
    assert "errorlist" in page
    assert agent_count(site.agency) == 0
    assert events(site.agency_id) == []


def test_valid_conditions_are_saved_and_the_format_is_explained(client: Client, site: Site) -> None:
    page = client.get(admin_url(Agent, "add")).content.decode()
    assert "dots for nested ones" in html.unescape(page)
    conditions = {"source": "web", "contact.country": ["AT", "DE"]}
    data = agent_form(
        site,
        trigger_events="crm.contact.created, form.submitted",
        trigger_conditions=json.dumps(conditions),
    )
    response = client.post(admin_url(Agent, "add"), data)
    assert response.status_code == 302, response.content.decode()[:2000]
    with tenancy.platform_context():
        agent = Agent.objects.get(site=site)
    assert agent.trigger_conditions == conditions
    assert agent.trigger_events == ["crm.contact.created", "form.submitted"]


def test_declared_inputs_are_saved_from_the_agent_page(client: Client, site: Site) -> None:
    inputs = {"type": "object", "properties": {"client": {"type": "string"}}}
    response = client.post(
        admin_url(Agent, "add"), agent_form(site, input_schema=json.dumps(inputs))
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    with tenancy.agency_context(site.agency_id):
        assert Agent.objects.get(site=site).input_schema == inputs
