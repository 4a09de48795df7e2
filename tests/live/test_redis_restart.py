"""Redis restarted while pages are open: broadcasts made while it is down are lost, and every
watcher (API clients that reconnect with ``?after=``, and the execution's page in Chromium)
still ends with exactly the run's events, in order, once each: what the database has.

The test runs its own Redis (other test runs share the embedded one), an ASGI server and a run
writer whose ``REDIS_URL`` point at it."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from agents.models import Execution
from core import tenancy
from core.models import Role
from tests.agents.factories import AgentFactory
from tests.api.conftest import new_key
from tests.browser.conftest import browser, logged_in  # noqa: F401 - the browser fixture
from tests.factories import MembershipFactory
from tests.live.helpers import PrivateRedis, RunWriter, open_socket
from tests.processes import TERMINAL, AsgiServer, pending_execution

pytestmark = pytest.mark.slow


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path).start()
    yield server
    server.shutdown()


@pytest.fixture
def server_on_private_redis(
    private_redis: PrivateRedis, django_db_setup: None
) -> Iterator[AsgiServer]:
    server = AsgiServer(REDIS_URL=private_redis.url).start()
    yield server
    server.stop()


class Watcher(threading.Thread):
    """An API client of one execution that, like docs/examples/watch_execution.py, reconnects
    with ``?after=<the last event number it got>`` whenever its connection drops, and keeps
    every event it receives."""

    def __init__(self, server: AsgiServer, execution: Execution, key: str) -> None:
        super().__init__(daemon=True)
        self.server = server
        self.path = f"/ws/executions/{execution.id}/"
        self.key = key
        self.seqs: list[int] = []  # every step and status event received, in order
        self.attempts = 0
        self.connections = 0
        self.caught_up = threading.Event()  # the first snapshot arrived
        self.ended = threading.Event()  # the run's last state change arrived
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            after = self.seqs[-1] if self.seqs else 0
            self.attempts += 1
            try:
                with open_socket(
                    self.server, f"{self.path}?after={after}", api_key=self.key, origin=None
                ) as ws:
                    self.connections += 1
                    while not self.stopping.is_set():
                        try:
                            self._receive(json.loads(ws.recv(timeout=0.2)))
                        except TimeoutError:
                            continue
            except (ConnectionClosed, InvalidHandshake, OSError):
                time.sleep(0.3)  # the server or Redis is away: try again

    def _receive(self, message: dict[str, object]) -> None:
        if message["type"] == "snapshot":
            self.caught_up.set()
        elif message["type"] in ("step", "status"):
            self.seqs.append(int(message["seq"]))  # type: ignore[call-overload]
            if message["type"] == "status" and message["status"] in TERMINAL:
                self.ended.set()

    def stop(self) -> None:
        self.stopping.set()
        self.join(5)


def test_pages_and_clients_converge_on_the_database_after_redis_restarts(
    private_redis: PrivateRedis,
    server_on_private_redis: AsgiServer,
    browser: Browser,  # noqa: F811 - the fixture imported above
    live_db: None,
) -> None:
    server = server_on_private_redis
    agent = AgentFactory.create()
    execution = pending_execution(agent, input_text="watch me through a Redis restart")
    key = new_key(agent.agency, Role.VIEWER)
    user = MembershipFactory.create(agency_id=agent.agency_id, role=Role.STAFF).user
    context = logged_in(browser, server, user)
    page_url = f"{server.url}/admin/agents/execution/{execution.id}/change/"
    watchers = [Watcher(server, execution, key) for _ in range(3)]
    writer: RunWriter | None = None
    try:
        for watcher in watchers:
            watcher.start()
        page = context.new_page()
        page.goto(page_url)
        live = page.locator("#live-run")
        expect(live.locator("[data-conn]")).to_have_text("live")
        assert all(watcher.caught_up.wait(15) for watcher in watchers)

        writer = RunWriter(execution, REDIS_URL=private_redis.url)  # claims the run
        texts = [f"step {n} of the run" for n in range(1, 16)]
        for text in texts[:5]:
            writer.step(text)
        expect(live.locator(".live-step--think")).to_have_count(5)

        private_redis.shutdown()
        # Opened while Redis is away: refused, then they try again by themselves.
        late = Watcher(server, execution, key)
        late.start()
        watchers.append(late)
        late_page = context.new_page()
        late_page.goto(page_url)
        late_live = late_page.locator("#live-run")
        expect(late_live.locator("[data-conn]")).to_have_text("reconnecting…")
        for text in texts[5:10]:  # their broadcasts are lost
            writer.step(text)
        private_redis.start()  # on the same port

        for text in texts[10:]:
            writer.step(text)
        final = writer.finish()

        # Every event the database numbered, in order, once each, to every client.
        for watcher in watchers:
            assert watcher.ended.wait(25), f"a client has {watcher.seqs} of 1..{final}"
        time.sleep(0.5)  # and nothing after the last
        for watcher in watchers:
            assert watcher.seqs == list(range(1, final + 1))
        with tenancy.agency_context(agent.agency_id):
            assert Execution.objects.get(pk=execution.pk).sequence == final
        # Both pages show the run as the database has it, each step once, in order.
        for shown in (live, late_live):
            expect(shown.locator('[data-field="status"]')).to_have_text("Completed")
            expect(shown.locator(".live-step--think .live-step__text")).to_have_text(texts)
    finally:
        for watcher in watchers:
            watcher.stop()
        if writer is not None:
            writer.close()
        context.close()
