"""Webhooks in the admin: staff create one and see its URL and secret once, rotate it (the new
secret once, the old one kept for the grace), disable it; viewers do not see webhooks; another
agency's webhook is a 404."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from core import tenancy
from core.models import Agency, Role, User
from tests.admin.conftest import member
from tests.admin.helpers import admin_url, change_url
from tests.agents.factories import AgentFactory
from tests.webhooks.conftest import Hook, deliver, make_hook
from webhooks.models import Webhook

pytestmark = pytest.mark.django_db
SECRET = re.compile(r"whsec_[A-Za-z0-9_\-]+")


def _messages(response: Any) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def test_staff_create_a_webhook_and_see_its_url_and_secret_once(
    agency: Agency, staff: User, login: Callable[[User], Client]
) -> None:
    agent = AgentFactory.create(agency=agency)
    client = login(staff)
    assert client.get(admin_url(Webhook, "add")).status_code == 200
    response = client.post(
        admin_url(Webhook, "add"),
        {"agent": str(agent.pk), "name": "Shop orders", "is_enabled": "on"},
        follow=True,
    )
    assert response.status_code == 200
    with tenancy.platform_context():
        webhook = Webhook.objects.select_related("agent").get()
    assert (webhook.agency_id, webhook.agent_id, webhook.created_by_id) == (
        agency.id,
        agent.id,
        staff.pk,
    )
    [shown] = [m for m in _messages(response) if "whsec_" in m]
    assert webhook.url in shown
    secret = SECRET.search(shown).group(0)  # type: ignore[union-attr]
    assert deliver(Hook(webhook, secret)).status_code == 202
    # Never again: not on its page, not in the list.
    for page in (client.get(change_url(webhook)), client.get(admin_url(Webhook, "changelist"))):
        assert page.status_code == 200
        assert secret not in page.content.decode()
        assert webhook.url in page.content.decode()


def test_the_rotate_action_shows_the_new_secret_and_keeps_the_old_for_a_day(
    agency: Agency, staff: User, login: Callable[[User], Client]
) -> None:
    hook = make_hook(AgentFactory.create(agency=agency))
    response = login(staff).post(
        admin_url(Webhook, "changelist"),
        {"action": "rotate_with_grace", "_selected_action": [str(hook.webhook.pk)], "index": "0"},
        follow=True,
    )
    [shown] = [m for m in _messages(response) if "whsec_" in m]
    new_secret = SECRET.search(shown).group(0)  # type: ignore[union-attr]
    assert "the old one is accepted until" in shown
    assert deliver(Hook(hook.webhook, new_secret)).status_code == 202
    assert deliver(hook).status_code == 202  # the old secret, in its grace period


def test_the_disable_action_makes_deliveries_refused(
    agency: Agency, staff: User, login: Callable[[User], Client]
) -> None:
    hook = make_hook(AgentFactory.create(agency=agency))
    login(staff).post(
        admin_url(Webhook, "changelist"),
        {"action": "disable", "_selected_action": [str(hook.webhook.pk)], "index": "0"},
    )
    assert deliver(hook).status_code == 403


@pytest.mark.parametrize("role", [Role.VIEWER, Role.APPROVER])
def test_viewers_and_approvers_do_not_see_webhooks(
    agency: Agency, login: Callable[[User], Client], role: str
) -> None:
    hook = make_hook(AgentFactory.create(agency=agency))
    client = login(member(agency, role))
    assert client.get(admin_url(Webhook, "changelist")).status_code == 403
    assert client.get(change_url(hook.webhook)).status_code == 403
    assert client.get(admin_url(Webhook, "add")).status_code == 403


def test_another_agencys_webhook_and_agent_are_out_of_reach(
    agency: Agency, other_agency: Agency, staff: User, login: Callable[[User], Client]
) -> None:
    theirs = make_hook(AgentFactory.create(agency=other_agency))
    client = login(staff)
    assert client.get(change_url(theirs.webhook)).status_code == 404
    assert (
        str(theirs.webhook.pk) not in client.get(admin_url(Webhook, "changelist")).content.decode()
    )
    response = client.post(
        admin_url(Webhook, "add"), {"agent": str(theirs.agent.pk), "name": "Mine now"}
    )
    assert response.status_code == 200  # the form again: no such agent to choose
    assert "agent" in response.context["adminform"].form.errors
    with tenancy.platform_context():
        assert Webhook.objects.count() == 1
    client.post(
        admin_url(Webhook, "changelist"),
        {"action": "rotate_at_once", "_selected_action": [str(theirs.webhook.pk)], "index": "0"},
    )
    assert deliver(theirs).status_code == 202  # its secret did not change
