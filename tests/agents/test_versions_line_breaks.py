"""Versions record only what changed (issue 27 item 3): a browser sends a textarea's line breaks
as CRLF, so a save from the admin that changed the prompt and the temperature listed the
untouched personality too, struck out and re-added identically, in the diff and the restore
preview. Text is kept with LF line breaks, and versions recorded before (with CRLF) compare
equal to the same text with LF."""

from __future__ import annotations

from typing import Any

import pytest

from agents.models import Agent, AgentVersion
from agents.services import agent_create, agent_update, agent_version_restore
from agents.services.versions import agent_versions, config_of, version_diff
from core import tenancy
from core.exceptions import ApplicationError
from core.models import Event, Site
from tests.factories import AgencyFactory, SiteFactory

PERSONALITY = "You are Alex, a helpful assistant.\nFriendly but professional.\nBrief."
PROMPT = "Help the user get their work done.\nAsk when a request is ambiguous."


def _crlf(text: str) -> str:
    return text.replace("\n", "\r\n")


@pytest.fixture
def site(db: None) -> Site:
    return SiteFactory.create(agency=AgencyFactory.create())


def _create(site: Site) -> Agent:
    fields: dict[str, Any] = {
        "name": "Alex",
        "agent_type": "assistant",
        "personality": PERSONALITY,
        "system_prompt": PROMPT,
        "temperature": "0.70",
    }
    return agent_create(agency_id=site.agency_id, site=site, **fields)


def test_a_save_with_crlf_line_breaks_records_only_the_fields_that_changed(site: Site) -> None:
    """What the admin form posts: every textarea with CRLF, two fields really changed."""
    with tenancy.agency_context(site.agency_id):
        agent = _create(site)
        agent_update(
            agent=agent,
            personality=_crlf(PERSONALITY),
            system_prompt=_crlf(PROMPT + "\nBe brief."),
            temperature="0.40",
        )
        new, old = list(agent_versions(agent=agent))
        updated = Event.objects.get(event_type="ai.agent.updated")
        agent.refresh_from_db()
    assert new.change_summary == ["system_prompt", "temperature"]
    assert [change.name for change in version_diff(old.config, new.config)] == [
        "system_prompt",
        "temperature",
    ]
    assert agent.personality == PERSONALITY  # stored as it was, not with the browser's CRLF
    assert agent.system_prompt == PROMPT + "\nBe brief."
    assert sorted(updated.payload["changes"]) == ["system_prompt", "temperature"]


def test_a_save_changing_only_line_breaks_makes_no_version(site: Site) -> None:
    with tenancy.agency_context(site.agency_id):
        agent = _create(site)
        agent_update(agent=agent, personality=_crlf(PERSONALITY), system_prompt=_crlf(PROMPT))
        assert list(agent_versions(agent=agent).values_list("number", flat=True)) == [1]


def test_versions_recorded_with_crlf_compare_equal_to_the_same_text(site: Site) -> None:
    """An agent saved from the admin before the fix: its row and its latest version hold CRLF.
    Its diff with the next save, the restore preview of an older version and a save of nothing
    list no unchanged field; restoring a version that differs only so changes nothing."""
    with tenancy.agency_context(site.agency_id):
        agent = _create(site)
        first = agent_versions(agent=agent).get(number=1)
        Agent.objects.filter(pk=agent.pk).update(
            personality=_crlf(PERSONALITY), system_prompt=_crlf(PROMPT)
        )
        agent.refresh_from_db()
        crlf = AgentVersion.objects.create(
            agency_id=agent.agency_id,
            agent=agent,
            number=2,
            config={**first.config, "personality": _crlf(PERSONALITY)},
            change_summary=["personality"],
        )
        Agent.objects.filter(pk=agent.pk).update(current_version=crlf)
        agent.refresh_from_db()

        agent_update(agent=agent)  # a save of nothing
        assert list(agent_versions(agent=agent).values_list("number", flat=True)) == [2, 1]
        assert version_diff(config_of(agent), first.config) == []  # the restore preview
        with pytest.raises(ApplicationError) as nothing:
            agent_version_restore(agent=agent, version=first)
        assert nothing.value.code == "no_change"

        agent_update(agent=agent, temperature="0.40")
        latest = agent_versions(agent=agent).first()
    assert latest is not None
    assert latest.change_summary == ["temperature"]
    assert [change.name for change in version_diff(crlf.config, latest.config)] == ["temperature"]
