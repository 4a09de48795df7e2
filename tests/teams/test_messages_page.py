"""A run's page lists its agent-to-agent messages (seed 003), each with a link to the run at the
other end: the delegating run shows its request and the answer, the delegated run the same two
from its side. Another agency's messages never show."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from django.test import Client

from agents.models import ExecutionStatus, MessageType, TriggerType
from core.models import Agency, User
from teams.selectors import messages_of
from tests.admin.helpers import change_url
from tests.agents.factories import AgentFactory, AgentMessageFactory, ExecutionFactory

pytestmark = pytest.mark.django_db


def test_both_runs_pages_list_the_messages_with_links_to_each_other(
    agency: Agency, staff: User, login: Callable[[User], Client]
) -> None:
    lead = AgentFactory.create(agency=agency, slug="lead")
    helper = AgentFactory.create(agency=agency, site=lead.site, slug="helper-research")
    parent = ExecutionFactory.create(agent=lead, status=ExecutionStatus.COMPLETED)
    child = ExecutionFactory.create(
        agent=helper,
        parent=parent,
        depth=1,
        trigger_type=TriggerType.AGENT,
        status=ExecutionStatus.COMPLETED,
    )
    request = AgentMessageFactory.create(
        from_execution=parent,
        to_execution=child,
        to_agent=helper,
        content={"instruction": "Find Ada's renewal date."},
    )
    AgentMessageFactory.create(
        from_execution=child,
        to_execution=parent,
        from_agent=helper,
        to_agent=lead,
        message_type=MessageType.RESULT,
        is_request=False,
        in_response_to=request,
        content={"output": "It renews on 2027-01-31."},
    )
    elsewhere = ExecutionFactory.create()  # another agency's run and message
    AgentMessageFactory.create(from_execution=elsewhere, content={"instruction": "Not yours."})
    client = login(staff)

    lead_page = client.get(change_url(parent)).content.decode()
    helper_page = client.get(change_url(child)).content.decode()

    for page, other, directions in (
        (lead_page, child, ["to", "from"]),
        (helper_page, parent, ["from", "to"]),
    ):
        table = re.search(r'<table class="agent-messages".*?</table>', page, re.DOTALL)
        assert table is not None
        rows = re.findall(r"<tr><td[^>]*>(to|from) ", table.group(0))
        assert rows == directions
        assert table.group(0).count(change_url(other)) == 2
        assert "Find Ada&#x27;s renewal date." in table.group(0)
        assert "It renews on 2027-01-31." in table.group(0)
        assert "Not yours." not in page


def test_messages_of_does_not_return_other_agencies_rows(agency: Agency) -> None:
    from core import tenancy

    mine = ExecutionFactory.create(agent=AgentFactory.create(agency=agency))
    AgentMessageFactory.create(from_execution=mine)
    theirs = ExecutionFactory.create()
    AgentMessageFactory.create(from_execution=theirs, to_execution=mine)  # (a forged link)

    with tenancy.agency_context(agency.id):
        found = list(messages_of(mine.id))

    assert [m.from_execution_id for m in found] == [mine.id]
