"""The agency websocket: every status change of the agency's runs, nothing of another agency's."""

from __future__ import annotations

import uuid

import pytest

from core.models import Role, User
from live import protocol
from tests.agents.factories import AgentFactory
from tests.api.conftest import new_key
from tests.factories import MembershipFactory
from tests.live.helpers import ScriptedRun, open_socket, read_until, session_cookie
from tests.processes import AsgiServer

pytestmark = pytest.mark.slow


def test_a_dashboard_gets_its_agencys_status_changes_and_none_of_another(
    asgi_server: AsgiServer, live_db: None
) -> None:
    agent = AgentFactory.create()
    viewer = MembershipFactory.create(agency=agent.agency, role=Role.VIEWER).user
    with open_socket(asgi_server, "/ws/agency/", cookie=session_cookie(viewer)) as ws:
        ready = read_until(ws, lambda m: m["type"] == "ready").messages[-1]
        assert ready["agency_id"] == str(agent.agency_id)
        ScriptedRun.start(AgentFactory.create()).finish()  # another agency's run
        run = ScriptedRun.start(agent)
        run.step()  # steps go to the execution's watchers only
        final = run.finish()
        received = read_until(ws, lambda m: m.get("seq") == final).messages
    assert [(m["type"], m["execution_id"]) for m in received] == [
        ("status", str(run.execution.id))
    ] * 3
    assert [m["data"]["to_status"] for m in received] == ["pending", "running", "completed"]


def test_an_api_key_may_watch_its_agency(asgi_server: AsgiServer, live_db: None) -> None:
    agent = AgentFactory.create()
    with open_socket(asgi_server, "/ws/agency/", api_key=new_key(agent.agency), origin=None) as ws:
        assert read_until(ws, lambda m: m["type"] == "ready").messages[-1]["agency_id"] == str(
            agent.agency_id
        )


def test_a_superuser_names_the_agency_and_a_made_up_one_is_refused(
    asgi_server: AsgiServer, live_db: None
) -> None:
    agent = AgentFactory.create()
    admin = User.objects.create_superuser(f"root-{uuid.uuid4().hex[:8]}", "r@example.com", "pw")
    cookie = session_cookie(admin)
    with open_socket(asgi_server, f"/ws/agency/?agency={agent.agency_id}", cookie=cookie) as ws:
        assert read_until(ws, lambda m: m["type"] == "ready").messages
    for query in (f"?agency={uuid.uuid4()}", ""):
        with open_socket(asgi_server, f"/ws/agency/{query}", cookie=cookie) as ws:
            received = read_until(ws)
        assert (received.messages, received.close_code) == ([], protocol.CLOSE_NOT_FOUND)
    with open_socket(asgi_server, "/ws/agency/?agency=nope", cookie=cookie) as ws:
        assert read_until(ws).close_code == protocol.CLOSE_BAD_REQUEST
