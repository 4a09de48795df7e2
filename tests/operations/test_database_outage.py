"""PostgreSQL restarted under a batch of runs (a fast shutdown, as an operator or a failover
does it, down for a few seconds): no run fails, none is left behind, no tool is applied twice,
and runs started once it is back complete although the worker's pool held connections that died
with the old server. Real embedded PostgreSQL, real worker process, fake provider server.

Once PostgreSQL answers again, a worker serves the very next tasks (a run, the lease reaper) on
working connections: none gets one that died with the old server and fails, or waits for the
pool's reconnection backoff.

Also the web side: while the database is down, /healthz answers 503 naming it within 2 s and
the API answers 503 ``database_unavailable``, not a 500 page or a hang."""

from __future__ import annotations

import datetime
import logging
import os
import time
from collections.abc import Callable, Iterator

import httpx
import pytest
from django.db import connections
from django.utils import timezone

from agents.models import Agent, Execution, ExecutionStatus
from agents.services import execution_create
from agents.tasks import reap_expired_leases
from core import database, tenancy
from crm.models import Contact, Note
from devkit import embedded
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import Reply, by_turn, text_reply, tool_call_reply
from tests.processes import AsgiServer, Worker, pending_execution, wait_for

# It takes down the PostgreSQL every test uses: run on its own (`make test`: on servers of its
# own, tests/run.py).
pytestmark = [pytest.mark.slow, pytest.mark.serial]
logger = logging.getLogger(__name__)
BEFORE = 8  # runs in flight when PostgreSQL goes down
AFTER = 8  # runs started once it is back
DOWN_SECONDS = 5.0


def _pg_ctl(*args: str) -> None:
    from pgserver._commands import pg_ctl  # type: ignore[attr-defined]

    user = "pgserver" if os.geteuid() == 0 else None
    pg_ctl(["-w", *args], pgdata=embedded.data_dir() / "pg", user=user, timeout=60)


@pytest.fixture
def embedded_postgres() -> None:
    if embedded.running_pids()["postgres"] is None:
        pytest.skip("the suite does not run on the embedded PostgreSQL of this checkout")


def _drop_connections() -> None:
    """This process's connections died with the server: forget them (the pool's too)."""
    for conn in connections.all():
        conn.close()


def _reconnect() -> None:
    _drop_connections()
    database.wait_until_available(timeout=30)


@pytest.fixture
def restart_postgres(
    embedded_postgres: None, request: pytest.FixtureRequest
) -> Iterator[Callable[[float], None]]:
    """Stop PostgreSQL (fast shutdown: connections are cut), wait, start it again (same data
    folder, socket and port)."""
    # Every other test's connections die with it: they must not be running meanwhile.
    assert request.node.get_closest_marker("serial"), "a test that restarts PostgreSQL is serial"
    stopped: list[bool] = []

    def restart(down: float) -> None:
        _drop_connections()
        _pg_ctl("-m", "fast", "stop")
        stopped.append(True)
        time.sleep(down)
        _pg_ctl("restart")  # reuses the options of the previous start (postmaster.opts)
        stopped.pop()
        _reconnect()

    yield restart
    if stopped:  # a failure left it down: the rest of the suite needs it
        _pg_ctl("restart")
    _reconnect()


def _agent(make_agent: Callable[..., Agent], server: FakeProviderServer) -> tuple[Agent, Contact]:
    agent = make_agent(allowed_tools=["crm_*"], timeout_seconds=120)
    with tenancy.agency_context(agent.agency_id):
        contact = Contact.objects.create(agency_id=agent.agency_id, first_name="Ola")
    note = tool_call_reply("crm_add_note", {"contact_id": str(contact.id), "content": "Call."})
    server.set_responder(
        # The first reply takes a while: the outage comes while the runs wait for the model.
        by_turn(Reply(tool_calls=note.tool_calls, latency=2.0), text_reply("Noted.")),
        key=agent.llm_model,
    )
    return agent, contact


def _start(agent: Agent, n: int) -> list[Execution]:
    with tenancy.agency_context(agent.agency_id):
        runs = [execution_create(agent=agent, input="Note the call.") for _ in range(n)]
    assert all(run is not None for run in runs)
    return [run for run in runs if run is not None]


def test_runs_ride_out_a_postgresql_restart_and_runs_after_it_complete(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    restart_postgres: Callable[[float], None],
) -> None:
    agent, contact = _agent(make_agent, fake_llm_server)
    worker = Worker(concurrency=32).start()
    try:
        before = _start(agent, BEFORE)
        deadline = time.monotonic() + 30
        while len(fake_llm_server.requests_for(agent.llm_model)) < BEFORE:
            assert time.monotonic() < deadline, "the runs never called the model"
            time.sleep(0.05)
        restart_postgres(DOWN_SECONDS)
        after = _start(agent, AFTER)
        finished = [wait_for(run, timeout=90) for run in before + after]
    finally:
        worker.stop()
    outcomes = {run.status for run in finished}
    assert outcomes == {ExecutionStatus.COMPLETED}, [
        (run.status, run.error) for run in finished if run.status != ExecutionStatus.COMPLETED
    ]
    with tenancy.agency_context(agent.agency_id):
        notes = Note.objects.filter(contact=contact).count()
    assert notes == BEFORE + AFTER  # each run's note exactly once


def test_a_worker_serves_its_next_tasks_as_soon_as_postgresql_answers_again(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    restart_postgres: Callable[[float], None],
) -> None:
    agent = make_agent(timeout_seconds=120)
    fake_llm_server.set_responder(by_turn(text_reply("Done.")), key=agent.llm_model)
    # Its pool keeps 6 connections open: every one dies with the server.
    worker = Worker(concurrency=8, DATABASE_POOL_MIN_SIZE="6").start()
    try:
        for run in _start(agent, 4):
            wait_for(run, timeout=60)
        reap_expired_leases.delay()
        time.sleep(3.0)  # the work after the runs done too: the pool's connections are idle
        before = len(worker.output())
        restart_postgres(DOWN_SECONDS)
        back_at = timezone.now()  # the database answers this process again
        # A run whose message was lost long ago: the reaper's tick sends it again (the worker
        # logs a housekeeping task's work, not its start or end).
        lost = pending_execution(agent, input_text="Lost.")
        with tenancy.agency_context(agent.agency_id):
            Execution.objects.filter(pk=lost.pk).update(
                updated_at=timezone.now() - datetime.timedelta(hours=1)
            )
        # What comes first once it is back: beat's next tick, new runs.
        reap_expired_leases.delay()
        after = _start(agent, 4)
        finished = [wait_for(run, timeout=60) for run in [*after, lost]]
    finally:
        worker.stop()
    log = worker.output()[before:]
    assert [run.status for run in finished] == [ExecutionStatus.COMPLETED] * len(finished)
    assert f"execution {lost.pk}: still pending, delivering it again" in log, log[-3000:]
    assert "not claimed, database unavailable" not in log, log[-3000:]
    assert "raised unexpected" not in log, log[-3000:]
    claimed = max(run.started_at for run in finished if run.started_at is not None)
    logger.warning(
        "PostgreSQL back: runs started then claimed within %.2f s",
        (claimed - back_at).total_seconds(),
    )


def test_healthz_and_the_api_answer_503_fast_while_the_database_is_down(
    live_db: None, asgi_server: AsgiServer, embedded_postgres: None
) -> None:
    # Each request must answer well before this (a hang fails it): /healthz's deadline is
    # 1.8 s, the web's pool timeout 5 s (a worker's is 30 s).
    with httpx.Client(base_url=asgi_server.url, timeout=10) as client:
        assert client.get("/healthz").json()["checks"]["database"]["ok"] is True
        _drop_connections()
        _pg_ctl("-m", "fast", "stop")
        try:
            health = client.get("/healthz")
            live = client.get("/livez")  # Kubernetes' liveness probe: the pod is not restarted
            api = client.get("/api/v1/agents/", headers={"Authorization": "Bearer ak_x.y"})
            page = client.get("/admin/login/")
        finally:
            _pg_ctl("restart")
            _reconnect()
        assert health.status_code == 503
        assert "database" in health.json()["down"]
        assert live.status_code == 200
        assert api.status_code == 503, api.text[:300]
        assert api.json()["code"] == "database_unavailable"
        assert api.headers["Retry-After"]
        assert page.status_code == 503
        assert "unavailable" in page.text
        # Back: the probe, then a request that needs the database, which may wait out the pool
        # reconnecting (no worker runs here, so the Celery check stays down).
        deadline = time.monotonic() + 20
        while not client.get("/healthz").json()["checks"]["database"]["ok"]:
            assert time.monotonic() < deadline, "healthz did not see the database back"
            time.sleep(0.2)
        pages = [client.get("/admin/login/").status_code]
        while pages[-1] != 200 and time.monotonic() < deadline:
            time.sleep(0.2)
            pages.append(client.get("/admin/login/").status_code)
        assert pages[-1] == 200, pages
        assert set(pages) <= {200, 503}, pages  # refused cleanly while reconnecting, never a 500
