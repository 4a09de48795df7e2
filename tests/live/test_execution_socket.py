"""The execution websocket through the real ASGI server and Redis: who may watch (refusals alike
for every reason, never a byte of data), and catching up by event number with no gap and no
duplicate while steps commit."""

from __future__ import annotations

import random
import threading
import time
import uuid
from typing import Any

import pytest
from websockets.exceptions import InvalidStatus

from agents.models import Execution
from core import tenancy
from core.models import Role
from live import protocol
from tests.agents.factories import AgentFactory
from tests.api.conftest import new_key
from tests.factories import MembershipFactory
from tests.live.helpers import ScriptedRun, open_socket, read_until, session_cookie
from tests.processes import AsgiServer

pytestmark = pytest.mark.slow


@pytest.fixture
def run(live_db: None) -> ScriptedRun:
    return ScriptedRun.start(AgentFactory.create())


def _path(execution: Execution | str, after: int | None = None) -> str:
    execution_id = execution.id if isinstance(execution, Execution) else execution
    return f"/ws/executions/{execution_id}/" + (f"?after={after}" if after is not None else "")


def _member(run: ScriptedRun, role: str = Role.STAFF) -> Any:
    return MembershipFactory.create(agency_id=run.execution.agency_id, role=role).user


def test_a_watcher_gets_the_snapshot_then_each_step_as_it_commits(
    asgi_server: AsgiServer, run: ScriptedRun
) -> None:
    with open_socket(asgi_server, _path(run.execution), cookie=session_cookie(_member(run))) as ws:
        first = read_until(ws, lambda m: m["type"] == "snapshot").messages
        # Everything the run did so far (pending, then running) comes after the snapshot.
        history = read_until(ws, lambda m: m["seq"] == run.execution.sequence).messages
        assert first[-1]["status"] == "running"
        assert [m["data"]["to_status"] for m in history] == ["pending", "running"]

        seq = run.tool_step("crm_get_contact", {"id": 7}, {"error": {"message": "no contact"}})
        step = read_until(ws, lambda m: m["type"] == "step").messages[-1]
        assert step["seq"] == seq
        assert step["data"]["tool_name"] == "crm_get_contact"
        assert step["data"]["tool_input"] == {"id": 7}
        assert step["data"]["failed"] is True
        assert step["data"]["error"] == "no contact"

        final = run.finish()
        ended = read_until(ws, lambda m: m["type"] == "status").messages
        assert ended[-1]["seq"] == final
        assert ended[-1]["data"]["to_status"] == "completed"
        # A run that ends sends its header again (outcome, totals), before the events.
        assert [m["type"] for m in ended] == ["snapshot", "status"]
        assert ended[0]["output"] == "done"
        assert ended[0]["seq"] == final


def test_a_viewer_may_watch_and_nothing_the_client_sends_changes_the_run(
    asgi_server: AsgiServer, run: ScriptedRun
) -> None:
    cookie = session_cookie(_member(run, Role.VIEWER))
    with open_socket(asgi_server, _path(run.execution), cookie=cookie) as ws:
        assert read_until(ws, lambda m: m["type"] == "snapshot").messages
        ws.send('{"type": "cancel"}')
        ws.send('{"type": "execution.event", "seq": 999, "kind": "status"}')
        ws.send("not json")
        ws.send('{"type": "ping"}')
        assert read_until(ws, lambda m: m["type"] == "pong").messages[-1] == {"type": "pong"}
    with tenancy.agency_context(run.execution.agency_id):
        execution = Execution.objects.get(pk=run.execution.pk)
    assert execution.status == "running"
    assert execution.cancel_requested_at is None


def test_an_api_key_authenticates_in_the_header_or_the_first_message(
    asgi_server: AsgiServer, run: ScriptedRun
) -> None:
    key = new_key(run.agent.agency, Role.VIEWER)
    with open_socket(asgi_server, _path(run.execution), api_key=key, origin=None) as ws:
        assert read_until(ws, lambda m: m["type"] == "snapshot").messages
    with open_socket(asgi_server, _path(run.execution), origin=None) as ws:
        ws.send(f'{{"type": "auth", "api_key": "{key}"}}')
        assert read_until(ws, lambda m: m["type"] == "snapshot").messages


def test_refusals_are_alike_for_another_agency_a_deleted_and_a_made_up_execution(
    asgi_server: AsgiServer, run: ScriptedRun
) -> None:
    other = ScriptedRun.start(AgentFactory.create())
    deleted = ScriptedRun.start(AgentFactory.create(agency=run.agent.agency))
    with tenancy.agency_context(run.execution.agency_id):
        Execution.objects.filter(pk=deleted.execution.pk).delete()
    cookie = session_cookie(_member(run))
    key = new_key(run.agent.agency)
    for target in (other.execution, deleted.execution, str(uuid.uuid4()), "not-a-uuid"):
        for credentials in ({"cookie": cookie}, {"api_key": key, "origin": None}):
            with open_socket(asgi_server, _path(target), **credentials) as ws:
                received = read_until(ws)
            assert received.messages == []  # not a byte of data
            assert received.close_code == protocol.CLOSE_NOT_FOUND


def test_an_unauthenticated_client_is_refused(asgi_server: AsgiServer, run: ScriptedRun) -> None:
    with open_socket(asgi_server, _path(run.execution), api_key="adk_bogus_key") as ws:
        assert read_until(ws).close_code == protocol.CLOSE_UNAUTHENTICATED
    with open_socket(asgi_server, _path(run.execution)) as ws:
        ws.send('{"type": "auth", "api_key": "adk_bogus_key"}')
        received = read_until(ws)
        assert (received.messages, received.close_code) == ([], protocol.CLOSE_UNAUTHENTICATED)
    with open_socket(asgi_server, _path(run.execution)) as ws:  # says nothing at all
        received = read_until(ws, timeout=15)
        assert (received.messages, received.close_code) == ([], protocol.CLOSE_UNAUTHENTICATED)
    with open_socket(asgi_server, _path(run.execution, after=-1), cookie="x") as ws:
        assert read_until(ws).close_code == protocol.CLOSE_BAD_REQUEST


def test_a_cross_origin_handshake_is_refused(asgi_server: AsgiServer, run: ScriptedRun) -> None:
    cookie = session_cookie(_member(run))
    with pytest.raises(InvalidStatus) as refused:
        open_socket(asgi_server, _path(run.execution), cookie=cookie, origin="http://evil.test")
    assert refused.value.response.status_code == 403


def test_reconnecting_with_after_gets_exactly_the_missed_events_while_steps_commit(
    asgi_server: AsgiServer, run: ScriptedRun
) -> None:
    """Clients connect at random moments with a random ``after`` while a writer commits steps
    as fast as it can; each must get every event after its number, once, in order."""
    cookie = session_cookie(_member(run))
    run.step()
    writing = threading.Event()
    writing.set()
    last: list[int] = [run.execution.sequence]

    def write() -> None:
        from django.db import connection

        try:
            while writing.is_set():  # until the last client has read past what it awaits
                last.append(run.step(text="x" * random.randint(1, 300)))
                time.sleep(random.random() * 0.004)
        finally:
            connection.close()

    writer = threading.Thread(target=write)
    writer.start()
    results: list[tuple[int, list[int]]] = []
    try:
        for _ in range(100):
            after = random.randint(0, last[-1])
            with open_socket(asgi_server, _path(run.execution, after=after), cookie=cookie) as ws:
                read_until(ws, lambda m: m["type"] == "snapshot")
                # Read until a number committed after the connection was open.
                target = last[-1] + 3
                received = read_until(ws, lambda m, t=target: m.get("seq", 0) >= t)
            numbers = [m["seq"] for m in received.messages if m["type"] in ("step", "status")]
            results.append((after, numbers))
    finally:
        writing.clear()
        writer.join()
    for after, numbers in results:
        assert numbers, f"nothing after {after}"
        assert numbers == list(range(after + 1, numbers[-1] + 1)), f"after={after}: {numbers}"
