"""A worker killed with SIGKILL mid-run: its heartbeat stops while a second worker's goes on,
the reaper (called here every couple of seconds, as beat calls it) hands the dead worker's runs
on, and the second worker finishes every one of them exactly once, long before the dead
worker's 300 s leases would have run out.

Real worker processes, real embedded PostgreSQL and Redis, fake provider server. Half the runs
die after their CRM note was committed (waiting for the model's last reply), half before
(waiting for the first): none may add its note twice or lose it.

A worker killed while it holds runs it received but has not claimed (each waits for its row
lock, or for the retry of a claim that waited too long): another worker claims every one within
seconds of the heartbeat going quiet, not when the reaper's pending re-delivery comes round
(AGENTDESK_PENDING_REDELIVER_SECONDS) nor when Redis restores the dead worker's messages (its
visibility timeout): docs/decisions/0008-run-delivery.md.

The other way round: a PostgreSQL outage longer than the heartbeat timeout silences every
heartbeat at once; the reaper ticking right after it takes no run from the live workers."""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from django.db import connection
from django.utils import timezone

from agents.models import Agent, Execution, ExecutionStatus, StateTransition, TransitionType
from agents.services import execution_create
from agents.tasks import reap_expired_leases
from config import queues
from config.celery_app import app as celery_app
from core import tenancy
from crm.models import Contact, Note
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import Reply, by_turn, tool_call_reply
from ops.models import WorkerHeartbeat
from tests.operations.test_database_outage import (  # noqa: F401 - fixtures
    embedded_postgres,
    restart_postgres,
)
from tests.processes import TERMINAL, Worker

pytestmark = pytest.mark.slow
logger = logging.getLogger(__name__)
WAVE = 4  # runs per wave: one wave dies after its note, the other before
BEAT_SECONDS = 2.0  # how often the test calls the reaper, as beat would
LEASE = "300"  # the default lease: the heartbeat, not the lease, must be what hands runs on


@pytest.fixture
def rescue_queue(monkeypatch: pytest.MonkeyPatch) -> str:
    """A `runs` queue of the test's own, which only its rescuer takes: the reaper sends what
    it delivers again to the `runs` queue (config/queues.py), and the suite's long-lived worker
    (``celery_worker``, a 3 s lease) takes the suite's. Sharing it, that worker claimed a
    handed-on run, lost its lease during a 4 s model call, and the run bounced until it gave up."""
    queue = f"rescue-{uuid.uuid4().hex[:8]}"
    monkeypatch.setitem(celery_app.conf, "task_default_queue", queue)
    for task, routed_to in list(queues.ROUTES.items()):
        if routed_to == queues.RUNS:
            monkeypatch.setitem(queues.ROUTES, task, queue)
    return queue


def _agent(make_agent: Callable[..., Agent], server: FakeProviderServer) -> tuple[Agent, Contact]:
    agent = make_agent(allowed_tools=["crm_*"], timeout_seconds=600)
    with tenancy.agency_context(agent.agency_id):
        contact = Contact.objects.create(agency_id=agent.agency_id, first_name="Ola")
    note = tool_call_reply("crm_add_note", {"contact_id": str(contact.id), "content": "Call."})
    server.set_responder(
        # Both model calls take a while: the kill comes while the runs wait for one of them.
        by_turn(Reply(tool_calls=note.tool_calls, latency=1.5), Reply(text="Noted.", latency=4)),
        key=agent.llm_model,
    )
    return agent, contact


def _start(agent: Agent, n: int, *, queue: str) -> list[Execution]:
    with tenancy.agency_context(agent.agency_id):
        runs = [
            execution_create(agent=agent, input="Note the call.", queue=queue) for _ in range(n)
        ]
    assert all(run is not None for run in runs)
    return [run for run in runs if run is not None]


def _wait_for_requests(
    server: FakeProviderServer, agent: Agent, *, turn: int, count: int, timeout: float = 30
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        requests = server.requests_for(agent.llm_model)
        if sum(1 for request in requests if request.assistant_turns == turn) >= count:
            return
        assert time.monotonic() < deadline, f"fewer than {count} model calls at turn {turn}"
        time.sleep(0.05)


def _reload(runs: list[Execution]) -> list[Execution]:
    with tenancy.platform_context():
        found = Execution.objects.in_bulk([run.pk for run in runs])
    return [found[run.pk] for run in runs]


def test_a_killed_workers_runs_go_on_elsewhere_once_its_heartbeat_stops(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer, rescue_queue: str
) -> None:
    agent, contact = _agent(make_agent, fake_llm_server)
    # The runs start on a queue only the doomed worker takes; what the reaper sends again goes
    # to the default queue (the test's own), which the rescuer, already running (and beating),
    # takes.
    doomed_queue = f"doomed-{uuid.uuid4().hex[:8]}"
    rescuer = Worker(queue=rescue_queue, concurrency=2 * WAVE, AGENTDESK_LEASE_SECONDS=LEASE)
    rescuer.start()
    doomed = Worker(queue=doomed_queue, concurrency=2 * WAVE, AGENTDESK_LEASE_SECONDS=LEASE).start()
    try:
        after_note = _start(agent, WAVE, queue=doomed_queue)
        _wait_for_requests(fake_llm_server, agent, turn=1, count=WAVE)  # notes committed
        before_note = _start(agent, WAVE, queue=doomed_queue)
        _wait_for_requests(fake_llm_server, agent, turn=0, count=2 * WAVE)
        runs = after_note + before_note
        held = _reload(runs)
        assert doomed.process is not None
        process = f"{socket.gethostname()}:{doomed.process.pid}"
        assert {run.lease_owner.rsplit(":", 1)[0] for run in held} == {process}
        assert WorkerHeartbeat.objects.filter(process=process, stopped_at=None).exists()

        doomed.kill()
        killed_at = timezone.now()
        deadline = time.monotonic() + 120
        while any(run.status not in TERMINAL for run in _reload(runs)):
            assert time.monotonic() < deadline, "the dead worker's runs never finished"
            reap_expired_leases()
            time.sleep(BEAT_SECONDS)
        finished = _reload(runs)
    finally:
        doomed.kill()
        rescuer.stop()

    assert [run.status for run in finished] == [ExecutionStatus.COMPLETED] * len(runs), [
        (run.status, run.error) for run in finished
    ]
    for before, after in zip(held, finished, strict=True):
        # Claimed by the dead worker, then by the rescuer; maybe once more when a delivery sent
        # again meanwhile finds the run's new lease run out (the suite's shared worker runs
        # short leases, and a loaded machine can outlast one): a claim is exclusive, and the
        # notes below show the side effect happened once.
        assert after.attempts >= 2
        assert after.completed_at is not None
        assert before.lease_expires_at is not None
        # Taken over while the dead worker's lease still held: its heartbeat told.
        assert after.completed_at < before.lease_expires_at
    with tenancy.agency_context(agent.agency_id):
        assert Note.objects.filter(contact=contact).count() == len(runs)  # each exactly once
        takeovers = StateTransition.objects.filter(
            execution__in=runs, transition_type=TransitionType.RETRY
        )
        lost = takeovers.filter(triggered_by_event="worker_lost")
        assert set(lost.values_list("execution_id", flat=True)) == {run.pk for run in runs}
    # The rescuer stopped cleanly: its row says so, so nothing of it waits for the timeout.
    assert rescuer.process is not None
    rescued_by = WorkerHeartbeat.objects.get(
        process=f"{socket.gethostname()}:{rescuer.process.pid}"
    )
    assert rescued_by.stopped_at is not None
    last = max(run.completed_at for run in finished if run.completed_at is not None)
    logger.warning(
        "dead worker: %d runs completed, the last %.1f s after the kill",
        len(finished),
        (last - killed_at).total_seconds(),
    )


@contextmanager
def _rows_locked(runs: list[Execution]) -> Iterator[None]:
    """The runs' rows locked by another connection (as an approval's clicks lock a run), from
    entering the block until leaving it: a worker's claim waits for the lock, gives up after
    agents.runtime.store.CLAIM_LOCK_TIMEOUT and is retried a couple of seconds later."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with tenancy.agency_context(runs[0].agency_id):
                list(Execution.objects.select_for_update().filter(pk__in=[r.pk for r in runs]))
                held.set()
                release.wait(120)
        finally:
            connection.close()

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert held.wait(30), "the rows were not locked"
        yield
    finally:
        release.set()
        thread.join()


def test_a_killed_workers_received_but_unclaimed_runs_go_on_elsewhere_within_seconds(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer, rescue_queue: str
) -> None:
    agent = make_agent(timeout_seconds=600)
    fake_llm_server.set_responder(by_turn(Reply(text="Done.")), key=agent.llm_model)
    doomed_queue = f"doomed-{uuid.uuid4().hex[:8]}"
    rescuer = Worker(queue=rescue_queue, concurrency=WAVE, AGENTDESK_LEASE_SECONDS=LEASE)
    rescuer.start()
    doomed = Worker(queue=doomed_queue, concurrency=WAVE, AGENTDESK_LEASE_SECONDS=LEASE)
    try:
        runs = _start(agent, WAVE, queue=doomed_queue)  # queued: no worker takes that queue yet
        with _rows_locked(runs):
            doomed.start()
            deadline = time.monotonic() + 60
            while doomed.output().count("agents.run_execution[") < WAVE:
                assert time.monotonic() < deadline, "the doomed worker did not receive the runs"
                time.sleep(0.1)
            time.sleep(1.0)  # inside the claims' lock wait, or holding their retries
            assert {run.status for run in _reload(runs)} == {ExecutionStatus.PENDING}
            doomed.kill()
            killed_at = timezone.now()
        # Generous next to the goal (30 s: the heartbeat timeout plus a reaper interval), and
        # well short of the pending re-delivery (120 s) that took them before.
        deadline = time.monotonic() + 60
        while any(run.status not in TERMINAL for run in _reload(runs)):
            assert time.monotonic() < deadline, [(r.id, r.status) for r in _reload(runs)]
            reap_expired_leases()
            time.sleep(BEAT_SECONDS)
        finished = _reload(runs)
    finally:
        doomed.kill()
        rescuer.stop()

    assert [run.status for run in finished] == [ExecutionStatus.COMPLETED] * len(runs), [
        (run.status, run.error) for run in finished
    ]
    assert [run.attempts for run in finished] == [1] * len(runs)  # claimed once, by the rescuer
    claimed = max(run.started_at for run in finished if run.started_at is not None)
    last = max(run.completed_at for run in finished if run.completed_at is not None)
    logger.warning(
        "dead worker's unclaimed runs: the last claimed %.1f s after the kill, completed %.1f s",
        (claimed - killed_at).total_seconds(),
        (last - killed_at).total_seconds(),
    )


@pytest.mark.serial  # takes down the PostgreSQL every test uses
def test_a_database_outage_longer_than_the_heartbeat_timeout_takes_no_run_from_live_workers(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    restart_postgres: Callable[[float], None],  # noqa: F811 - the fixture imported above
) -> None:
    agent, contact = _agent(make_agent, fake_llm_server)
    queue = f"outage-{uuid.uuid4().hex[:8]}"
    workers = [
        Worker(queue=queue, concurrency=WAVE, AGENTDESK_LEASE_SECONDS=LEASE).start()
        for _ in range(2)
    ]
    try:
        runs = _start(agent, 2 * WAVE, queue=queue)
        _wait_for_requests(fake_llm_server, agent, turn=0, count=2 * WAVE)
        # Down longer than the timeout: when it is back, every heartbeat is that old.
        restart_postgres(12.0)
        deadline = time.monotonic() + 120
        while any(run.status not in TERMINAL for run in _reload(runs)):
            assert time.monotonic() < deadline, "the runs never finished"
            reap_expired_leases()
            time.sleep(BEAT_SECONDS)
        finished = _reload(runs)
    finally:
        for worker in workers:
            worker.stop()
    assert [run.status for run in finished] == [ExecutionStatus.COMPLETED] * len(runs), [
        (run.status, run.error) for run in finished
    ]
    assert [run.attempts for run in finished] == [1] * len(runs)  # none changed worker
    with tenancy.agency_context(agent.agency_id):
        assert Note.objects.filter(contact=contact).count() == len(runs)
