"""A worker given SIGTERM drains (issue 29, agents/worker_drain.py): it takes no new delivery,
each of its runs hands itself back at its next step boundary (pending, lease released, sent
to its queue again) and another worker continues it at once, with no reaper and no heartbeat
timeout involved; the worker exits within AGENTDESK_WORKER_DRAIN_SECONDS with exit code 0.
A step still in flight when the period ends is released from the watchdog and done again
elsewhere. Every side effect (a CRM note per tool call) happens once.

Real worker processes, embedded PostgreSQL and Redis, the fake provider server. The runs go to
a queue of the test's own, which the draining worker consumes; the other worker is told to
consume it (Celery's add_consumer) once every run is held by the first, so the handover is
the only way a run reaches it."""

from __future__ import annotations

import datetime
import logging
import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from django.utils import timezone

from agents.models import Agent, Execution, ExecutionStatus, ExecutionStep, StateTransition
from agents.runtime import drain
from agents.services import execution_create
from agents.tasks import run_execution
from config.celery_app import app as celery_app
from core import tenancy
from crm.models import Contact, Note
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import Reply, by_turn, tool_call_reply
from tests.processes import TERMINAL, Worker

pytestmark = pytest.mark.slow
logger = logging.getLogger(__name__)
RUNS = 50
NOTES = 5  # tool calls (one CRM note each) per run, then a final answer
LATENCY = 0.3  # seconds per model reply
LEASE = "300"  # the default lease: neither the lease nor the heartbeat may hand runs on
# The first step written on another worker after the signal: the first run's call in flight
# ends (within LATENCY), it is handed back and sent, claimed elsewhere, and that worker's model
# call (LATENCY) is answered and written. The goal is 2 s; the figures measured are in
# bench/README.md (the log line below, with the machine's load). Asserted with room for a loaded
# CI machine, and still well below what the heartbeat path takes (its 10 s timeout plus a reaper
# tick, and this test runs no reaper): only the hand-back meets it.
FIRST_STEP_ELSEWHERE = datetime.timedelta(seconds=5)


@pytest.fixture(scope="module")
def other_worker(django_db_setup: None) -> Iterator[Worker]:
    """The worker that takes the handed-back runs: idle on a queue of its own until told."""
    worker = Worker(
        queue=f"idle-{uuid.uuid4().hex[:8]}", concurrency=RUNS + 6, AGENTDESK_LEASE_SECONDS=LEASE
    ).start()
    yield worker
    worker.stop()


def _consume(worker: Worker, queue: str) -> None:
    replies = celery_app.control.add_consumer(
        queue, destination=[worker.name], reply=True, timeout=10
    )
    assert replies, f"{worker.name} did not answer add_consumer"


def _note(contact: Contact, *, latency: float, n: int = 0) -> Reply:
    # (each note its own content: the same call repeated would be flagged as a loop)
    content = f"Call {n}."
    note = tool_call_reply("crm_add_note", {"contact_id": str(contact.id), "content": content})
    return Reply(tool_calls=note.tool_calls, latency=latency)


def _contact(agent: Agent) -> Contact:
    with tenancy.agency_context(agent.agency_id):
        return Contact.objects.create(agency_id=agent.agency_id, first_name="Ola")


def _start(agent: Agent, n: int, *, queue: str) -> list[Execution]:
    with tenancy.agency_context(agent.agency_id):
        runs = [
            execution_create(agent=agent, input="Note the call.", queue=queue) for _ in range(n)
        ]
    assert all(run is not None for run in runs)
    return [run for run in runs if run is not None]


def _reload(runs: list[Execution]) -> list[Execution]:
    with tenancy.platform_context():
        found = Execution.objects.in_bulk([run.pk for run in runs])
    return [found[run.pk] for run in runs]


def _wait_until(condition: Callable[[], bool], what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _turns_reached(server: FakeProviderServer, agent: Agent, turn: int) -> int:
    return sum(1 for r in server.requests_for(agent.llm_model) if r.assistant_turns >= turn)


def _process(worker: Worker) -> str:
    assert worker.process is not None
    return f"{worker.name.split('@', 1)[1]}:{worker.process.pid}"


def _claims_by(runs: list[Execution], process: str) -> dict[uuid.UUID, datetime.datetime]:
    """When each run was first claimed by a thread of ``process``."""
    with tenancy.platform_context():
        rows = list(
            StateTransition.objects.filter(
                execution__in=runs,
                to_state=ExecutionStatus.RUNNING,
                transition_reason__startswith=f"claimed by {process}:",
            ).values_list("execution_id", "entered_at")
        )
    claims: dict[uuid.UUID, datetime.datetime] = {}
    for execution_id, entered in rows:
        claims[execution_id] = min(entered, claims.get(execution_id, entered))
    return claims


def _handed_back(runs: list[Execution]) -> list[StateTransition]:
    with tenancy.platform_context():
        return list(
            StateTransition.objects.filter(
                execution__in=runs,
                from_state=ExecutionStatus.RUNNING,
                to_state=ExecutionStatus.PENDING,
                triggered_by_event="worker_draining",
            )
        )


def test_a_worker_given_sigterm_hands_its_runs_to_another_within_seconds_and_exits(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer, other_worker: Worker
) -> None:
    agent = make_agent(allowed_tools=["crm_*"], timeout_seconds=600)
    contact = _contact(agent)
    fake_llm_server.set_responder(
        by_turn(
            *[_note(contact, latency=LATENCY, n=n) for n in range(NOTES)],
            Reply(text="Noted.", latency=LATENCY),
        ),
        key=agent.llm_model,
    )
    queue = f"drain-{uuid.uuid4().hex[:8]}"
    draining = Worker(
        queue=queue, concurrency=RUNS + 6, AGENTDESK_LEASE_SECONDS=LEASE
    ).start()  # (the default drain period: 20 s)
    try:
        runs = _start(agent, RUNS, queue=queue)
        # Every run held by the draining worker, each past its first note.
        _wait_until(
            lambda: _turns_reached(fake_llm_server, agent, 2) >= RUNS,
            "the runs did not reach their second note",
        )
        held = _reload(runs)
        process = _process(draining)
        assert {run.status for run in held} == {ExecutionStatus.RUNNING}
        assert {run.lease_owner.rsplit(":", 1)[0] for run in held} == {process}
        _consume(other_worker, queue)

        assert draining.process is not None
        signalled_at = timezone.now()
        signalled = time.monotonic()
        draining.process.send_signal(signal.SIGTERM)
        code = draining.wait_exit(timeout=30)
        exited_after = time.monotonic() - signalled
        _wait_until(
            lambda: all(run.status in TERMINAL for run in _reload(runs)),
            "the handed-back runs did not finish",
            timeout=120,
        )
        finished = _reload(runs)
    finally:
        draining.kill()

    assert code == 0, draining.output()[-3000:]
    assert exited_after < 20, exited_after  # within AGENTDESK_WORKER_DRAIN_SECONDS
    assert [run.status for run in finished] == [ExecutionStatus.COMPLETED] * RUNS, [
        (run.status, run.error) for run in finished
    ]
    # Handed back, not lost: no new attempt, no retry after a lost worker; each note once.
    assert [run.attempts for run in finished] == [1] * RUNS
    handed = _handed_back(runs)
    assert {t.execution_id for t in handed} == {run.pk for run in runs}
    with tenancy.agency_context(agent.agency_id):
        assert Note.objects.filter(contact=contact).count() == RUNS * NOTES
    # The other worker claimed every run and wrote its next steps.
    claims = _claims_by(runs, _process(other_worker))
    assert set(claims) == {run.pk for run in runs}
    with tenancy.platform_context():
        steps_elsewhere = [
            created
            for execution_id, created in ExecutionStep.objects.filter(
                execution__in=runs
            ).values_list("execution_id", "created_at")
            if created > claims[execution_id]
        ]
    assert len(steps_elsewhere) >= RUNS  # at least each run's final answer
    first = min(steps_elsewhere) - signalled_at
    first_claim = min(claims.values()) - signalled_at
    first_back = min(t.entered_at for t in handed) - signalled_at
    last_back = max(t.entered_at for t in handed) - signalled_at
    logger.warning(
        "drain of %d runs (model latency %.1f s): handed back from %.2f s to %.2f s after "
        "SIGTERM, first claim elsewhere %.2f s, first step elsewhere %.2f s; the worker exited "
        "after %.2f s (%d CPUs, load average %.1f)",
        RUNS,
        LATENCY,
        first_back.total_seconds(),
        last_back.total_seconds(),
        first_claim.total_seconds(),
        first.total_seconds(),
        exited_after,
        os.cpu_count() or 0,
        os.getloadavg()[0],
    )
    assert first < FIRST_STEP_ELSEWHERE, first


def test_a_step_in_flight_at_the_end_of_the_drain_period_is_released_and_done_elsewhere(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer, other_worker: Worker
) -> None:
    agent = make_agent(allowed_tools=["crm_*"], timeout_seconds=600)
    contact = _contact(agent)
    # The second model call outlasts the drain period: it is abandoned, and asked again
    # by the worker that continues the run.
    fake_llm_server.set_responder(
        by_turn(_note(contact, latency=0), _note(contact, latency=6, n=1), Reply(text="Noted.")),
        key=agent.llm_model,
    )
    queue = f"drain-{uuid.uuid4().hex[:8]}"
    draining = Worker(
        queue=queue,
        concurrency=4,
        AGENTDESK_LEASE_SECONDS=LEASE,
        AGENTDESK_WORKER_DRAIN_SECONDS="3",
    ).start()
    try:
        runs = _start(agent, 2, queue=queue)
        _wait_until(
            lambda: _turns_reached(fake_llm_server, agent, 1) >= len(runs),
            "the runs did not reach their slow model call",
        )
        _consume(other_worker, queue)
        assert draining.process is not None
        signalled = time.monotonic()
        draining.process.send_signal(signal.SIGTERM)
        code = draining.wait_exit(timeout=30)
        exited_after = time.monotonic() - signalled
        process = _process(draining)
        _wait_until(
            lambda: all(run.status in TERMINAL for run in _reload(runs)),
            "the released runs did not finish",
            timeout=60,
        )
        finished = _reload(runs)
    finally:
        draining.kill()

    assert code == 0, draining.output()[-3000:]
    assert exited_after < 6, exited_after  # within the period, not after the model call
    assert "drain period over: 2 deliveries in flight, 2 runs released" in draining.output()
    assert [run.status for run in finished] == [ExecutionStatus.COMPLETED] * len(runs)
    assert [run.attempts for run in finished] == [1] * len(runs)
    handed = _handed_back(runs)
    assert len(handed) == len(runs)
    assert all(t.transition_reason.startswith(f"handed back by {process}:") for t in handed)
    assert all("drain period ran out" in t.transition_reason for t in handed)
    with tenancy.agency_context(agent.agency_id):
        assert Note.objects.filter(contact=contact).count() == 2 * len(runs)


def test_a_delivery_received_while_draining_is_sent_to_its_queue_unclaimed(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer, other_worker: Worker
) -> None:
    agent = make_agent(timeout_seconds=600)
    fake_llm_server.set_responder(by_turn(Reply(text="Done.")), key=agent.llm_model)
    queue = f"drain-{uuid.uuid4().hex[:8]}"
    (execution,) = _start(agent, 1, queue=f"nobody-{uuid.uuid4().hex[:8]}")
    _consume(other_worker, queue)
    drain.begin()  # this process plays the draining worker that received the delivery
    try:
        outcome = run_execution.apply(
            args=[str(execution.id)], kwargs={"agency_id": str(agent.agency_id)}, routing_key=queue
        ).get()
    finally:
        drain.reset()
    assert outcome == drain.HANDED_BACK
    _wait_until(lambda: _reload([execution])[0].status in TERMINAL, "not run elsewhere", 60)
    (finished,) = _reload([execution])
    assert finished.status == ExecutionStatus.COMPLETED
    assert set(_claims_by([execution], _process(other_worker))) == {execution.pk}
