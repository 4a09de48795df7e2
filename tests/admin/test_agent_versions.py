"""The agent's versions in the admin: the list and a diff for everyone who may see the agent,
restore (confirm, then POST: a new version) for those who may edit it; the execution page names
its version."""

from __future__ import annotations

import html
import re
from collections.abc import Callable

import pytest
from django.contrib.admin.models import LogEntry
from django.test import Client

from agents.models import Agent, AgentVersion
from agents.services import agent_create, agent_update
from core import tenancy
from core.models import Role, Site, User
from tests.admin.conftest import member
from tests.admin.helpers import admin_url, change_url
from tests.admin.test_agent_admin import agent_form
from tests.agents.factories import ExecutionFactory
from tests.factories import AgencyFactory, SiteFactory

pytestmark = pytest.mark.django_db

PROMPT_ONE = "Qualify new leads.\nBe brief.\nAnswer in English."
PROMPT_TWO = "Qualify new leads.\nBe thorough.\nAnswer in English."


def _agent(site: Site) -> Agent:
    """Version 1 with PROMPT_ONE, version 2 with PROMPT_TWO and another temperature."""
    with tenancy.agency_context(site.agency_id):
        agent = agent_create(
            agency_id=site.agency_id,
            site=site,
            name="Lead qualifier",
            agent_type="specialist",
            system_prompt=PROMPT_ONE,
        )
        return agent_update(agent=agent, system_prompt=PROMPT_TWO, temperature="0.20")


def _versions(agent: Agent) -> list[AgentVersion]:
    with tenancy.platform_context():
        return list(AgentVersion.objects.filter(agent_id=agent.pk).order_by("number"))


def _current_number(agent: Agent) -> int:
    with tenancy.platform_context():
        return Agent.objects.get(pk=agent.pk).current_version.number  # type: ignore[union-attr]


def _rows(page: str) -> list[str]:
    return re.findall(r'<tr class="version-row" data-number="(\d+)">', page)


def _text(page: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", page))


@pytest.mark.parametrize("role", list(Role))
def test_every_role_sees_the_versions_and_only_editors_may_restore(
    role: str, site: Site, login: Callable[[User], Client]
) -> None:
    agent = _agent(site)
    client = login(member(site.agency, role))
    may_edit = role in (Role.ADMIN, Role.STAFF)

    page = client.get(admin_url(Agent, "versions", agent.pk))

    assert page.status_code == 200
    body = page.content.decode()
    assert _rows(body) == ["2", "1"]
    assert "current" in body
    assert ("version-restore" in body) is may_edit
    restore = admin_url(Agent, "restore_version", agent.pk, 1)
    assert client.get(restore).status_code == (200 if may_edit else 403)
    if not may_edit:
        assert client.post(restore).status_code == 403
        assert len(_versions(agent)) == 2
    # The agent page links to them.
    assert admin_url(Agent, "versions", agent.pk) in client.get(change_url(agent)).content.decode()


def test_the_diff_shows_the_edit(site: Site, staff: User, login: Callable[[User], Client]) -> None:
    agent = _agent(site)
    client = login(staff)

    default = _text(client.get(admin_url(Agent, "versions", agent.pk)).content.decode())
    picked = _text(
        client.get(admin_url(Agent, "versions", agent.pk), {"a": "2", "b": "1"}).content.decode()
    )

    assert "Version 1 → version 2" in default  # by default: the previous one to the latest
    assert '<span class="version-line version-removed">- Be brief.</span>' in default
    assert '<span class="version-line version-added">+ Be thorough.</span>' in default
    assert '<span class="version-line version-context"> Answer in English.</span>' in default
    assert '<div class="version-diff-field" data-field="temperature">' in default
    assert "<del>0.70</del>" in default
    assert "<ins>0.20</ins>" in default
    assert 'data-field="llm_model"' not in default  # unchanged fields are left out
    assert "Version 2 → version 1" in picked
    assert '<span class="version-line version-added">+ Be brief.</span>' in picked


def test_restore_confirms_then_makes_a_new_version(
    site: Site, staff: User, login: Callable[[User], Client]
) -> None:
    agent = _agent(site)
    client = login(staff)
    url = admin_url(Agent, "restore_version", agent.pk, 1)

    confirm = _text(client.get(url).content.decode())
    assert "Restore version 1 of Lead qualifier?" in confirm
    assert '<span class="version-line version-added">+ Be brief.</span>' in confirm
    assert len(_versions(agent)) == 2  # a GET changes nothing

    response = client.post(url, follow=True)

    assert response.redirect_chain[-1][0] == admin_url(Agent, "versions", agent.pk)
    assert "Restored version 1: it is version 3 now." in response.content.decode()
    versions = _versions(agent)
    assert [v.number for v in versions] == [1, 2, 3]
    assert versions[2].config == versions[0].config
    assert versions[2].restored_from_id == versions[0].pk
    assert versions[2].created_by_id == staff.pk
    assert _current_number(agent) == 3
    with tenancy.platform_context():
        assert Agent.objects.get(pk=agent.pk).system_prompt == PROMPT_ONE
    assert LogEntry.objects.filter(object_id=str(agent.pk)).last().get_change_message() == (  # type: ignore[union-attr]
        "Restored version 1 as version 3."
    )
    assert "(restored version 1)" in _text(response.content.decode())

    again = client.post(admin_url(Agent, "restore_version", agent.pk, 3), follow=True)
    assert "is the agent&#x27;s current one already" in again.content.decode()
    assert len(_versions(agent)) == 3


def test_saving_the_agent_form_makes_a_version_only_when_the_configuration_changes(
    site: Site, staff: User, login: Callable[[User], Client]
) -> None:
    client = login(staff)
    assert client.post(admin_url(Agent, "add"), agent_form(site)).status_code == 302
    with tenancy.platform_context():
        agent = Agent.objects.get(slug="lead-qualifier")
    assert client.post(change_url(agent), agent_form(site)).status_code == 302  # unchanged
    assert client.post(change_url(agent), agent_form(site, is_active="on")).status_code == 302
    assert [v.number for v in _versions(agent)] == [1]
    data = agent_form(site, is_active="on", system_prompt="Qualify every lead.")
    assert client.post(change_url(agent), data).status_code == 302
    versions = _versions(agent)
    assert [(v.number, v.change_summary, v.created_by_id) for v in versions] == [
        (1, [], staff.pk),
        (2, ["system_prompt"], staff.pk),
    ]
    assert _current_number(agent) == 2


def test_another_agencys_versions_are_a_404(
    site: Site, staff: User, login: Callable[[User], Client]
) -> None:
    theirs = _agent(SiteFactory.create(agency=AgencyFactory.create()))
    client = login(staff)
    assert client.get(admin_url(Agent, "versions", theirs.pk)).status_code == 404
    assert client.get(admin_url(Agent, "restore_version", theirs.pk, 1)).status_code == 404
    assert client.post(admin_url(Agent, "restore_version", theirs.pk, 1)).status_code == 404
    assert len(_versions(theirs)) == 2


def test_an_unknown_version_is_a_404(
    site: Site, staff: User, login: Callable[[User], Client]
) -> None:
    agent = _agent(site)
    client = login(staff)
    for number in ("9", "0", "x"):
        assert client.get(admin_url(Agent, "restore_version", agent.pk, number)).status_code == 404
    # A pick that is not one of its versions falls back to the default comparison.
    page = client.get(admin_url(Agent, "versions", agent.pk), {"a": "9", "b": "x"})
    assert "Version 1 → version 2" in _text(page.content.decode())


def test_a_superuser_sees_any_agencys_versions(
    site: Site, superuser: User, login: Callable[[User], Client]
) -> None:
    agent = _agent(site)
    page = login(superuser).get(admin_url(Agent, "versions", agent.pk))
    assert page.status_code == 200
    assert _rows(page.content.decode()) == ["2", "1"]


def test_the_execution_page_names_its_version_and_links_the_diff_since(
    site: Site, staff: User, login: Callable[[User], Client]
) -> None:
    agent = _agent(site)
    first = _versions(agent)[0]
    execution = ExecutionFactory.create(
        agent=agent, agency=site.agency, site=site, agent_version=first
    )
    page = _text(login(staff).get(change_url(execution)).content.decode())
    versions_url = admin_url(Agent, "versions", agent.pk)
    assert (
        f'<a href="{versions_url}" class="text-primary-600 dark:text-primary-500">Version 1</a>'
        in page
    )
    assert f"{versions_url}?a=1&b=2" in page
    assert "diff with version 2" in page


def test_a_long_history_is_paged_newest_first(
    site: Site, staff: User, login: Callable[[User], Client]
) -> None:
    agent = _agent(site)
    with tenancy.agency_context(site.agency_id):
        for steps in range(1, 54):
            agent_update(agent=agent, max_steps_per_run=steps)  # versions 3 to 55
    client = login(staff)
    url = admin_url(Agent, "versions", agent.pk)

    first = client.get(url).content.decode()
    second = client.get(url, {"page": "2"}).content.decode()

    assert _rows(first) == [str(n) for n in range(55, 5, -1)]
    assert _rows(second) == ["5", "4", "3", "2", "1"]
    assert "Page 1 of 2" in first
    assert "Version 54 → version 55" in _text(first)
