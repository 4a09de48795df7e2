"""After-run work (agents/after_run.py: a run's episode completed, its memories extracted, its
quality scored: ``memory.after_run``) survives outages: runs that end while Redis is down (their
after-run messages cannot be sent) have it done once Redis is back, and an after-run task that
meets a PostgreSQL restart under it is retried, not lost.

Real embedded Redis and PostgreSQL (the session's own, taken down inside the tests and always
back when they end), real worker process, fake provider server."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections.abc import Callable, Iterator

import pytest
from django.conf import settings

from agents.models import AfterRunWork, Agent, Execution, ExecutionStatus
from agents.services import execution_create
from agents.tasks import reap_expired_leases
from core import tenancy
from devkit import embedded
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import RecordedRequest, Reply, Step, by_turn, text_reply
from memory.episodes import DONE_KEY
from memory.extraction import EXTRACTION_PROMPT
from memory.learning.models import RunQuality
from memory.models import Memory
from tests.operations.test_database_outage import (  # noqa: F401 - fixtures
    embedded_postgres,
    restart_postgres,
)
from tests.processes import TERMINAL, Worker, wait_for

# They take down the Redis and the PostgreSQL every test uses: run on their own (`make test`: on
# servers of their own, tests/run.py).
pytestmark = [pytest.mark.slow, pytest.mark.serial]
RUNS = 4
BEAT_SECONDS = 2.0  # how often the test calls the reaper, as beat would
EXTRACTOR = EXTRACTION_PROMPT.split(".")[0]


def _redis_port() -> int:
    return int((embedded.data_dir() / "redis" / "port").read_text())


@pytest.fixture
def redis_down() -> Iterator[Callable[[], Callable[[], None]]]:
    """Kill the session's embedded Redis (SIGKILL); returns the function that starts it again
    on the same port. Whatever happens in the test, Redis is back when it ends."""
    if embedded.running_pids()["redis"] is None:
        pytest.skip("the suite does not run on the embedded Redis of this checkout")
    port = _redis_port()
    if not str(settings.REDIS_URL).startswith(f"redis://127.0.0.1:{port}/"):
        pytest.skip("the suite's Redis is not the embedded one")

    def back() -> None:
        embedded.ensure_running(["redis"])
        assert _redis_port() == port, "the embedded Redis came back on another port"

    def kill() -> Callable[[], None]:
        pid = embedded.running_pids()["redis"]
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while embedded.port_open(port):
            assert time.monotonic() < deadline, "Redis still listens after SIGKILL"
            time.sleep(0.02)
        return back

    yield kill
    if embedded.running_pids()["redis"] is None or not embedded.port_open(port):
        back()


def _start(agent: Agent, n: int) -> list[Execution]:
    with tenancy.agency_context(agent.agency_id):
        runs = [execution_create(agent=agent, input="Note the call.") for _ in range(n)]
    assert all(run is not None for run in runs)
    return [run for run in runs if run is not None]


def _after_run_done(run: Execution) -> bool:
    """The run's episode is complete and its quality scored."""
    with tenancy.agency_context(run.agency_id):
        execution = Execution.objects.get(pk=run.pk)
        scored = RunQuality.objects.filter(execution_id=run.pk).exists()
    return scored and DONE_KEY in (execution.result or {})


def _owed(runs: list[Execution]) -> int:
    with tenancy.platform_context():
        return AfterRunWork.objects.filter(execution_id__in=[run.pk for run in runs]).count()


def test_after_run_work_of_runs_that_end_while_redis_is_down_is_done_once_it_is_back(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    redis_down: Callable[[], Callable[[], None]],
) -> None:
    agent = make_agent(timeout_seconds=600, memory_extraction_enabled=False)
    # The runs wait for their answer while Redis goes down: they end (they need only
    # PostgreSQL) while it is down, and their after-run messages cannot be sent.
    fake_llm_server.set_responder(by_turn(Reply(text="Noted.", latency=3.0)), key=agent.llm_model)
    worker = Worker(concurrency=RUNS, AGENTDESK_LEASE_SECONDS="300").start()
    try:
        reap_expired_leases()  # the reaper knows the broker before it goes down
        runs = _start(agent, RUNS)
        deadline = time.monotonic() + 30
        while len(fake_llm_server.requests_for(agent.llm_model)) < RUNS:
            assert time.monotonic() < deadline, "the runs never called the model"
            time.sleep(0.05)
        bring_back = redis_down()
        ended = [wait_for(run, timeout=60) for run in runs]
        # Each run's after-run message was refused by the broker (the worker logged it).
        deadline = time.monotonic() + 60
        unsent = [re.compile(rf"execution {run.pk}: .*not sent") for run in runs]
        while not all(pattern.search(worker.output()) for pattern in unsent):
            assert time.monotonic() < deadline, worker.output()[-3000:]
            time.sleep(0.1)
        assert not any(_after_run_done(run) for run in runs)
        bring_back()
        deadline = time.monotonic() + 120
        while not all(_after_run_done(run) for run in runs):
            assert time.monotonic() < deadline, "after-run work lost with the broker"
            reap_expired_leases()  # as beat calls it
            time.sleep(BEAT_SECONDS)
        alive = worker.process is not None and worker.process.poll() is None
    finally:
        worker.stop()

    assert alive, worker.output()[-3000:]
    assert [run.status for run in ended] == [ExecutionStatus.COMPLETED] * RUNS
    deadline = time.monotonic() + 30
    while _owed(runs):  # each task deletes its row once its work is done
        assert time.monotonic() < deadline, "after-run work done but still recorded as owed"
        time.sleep(0.1)


def test_an_after_run_task_that_meets_a_postgresql_restart_is_retried_not_lost(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    restart_postgres: Callable[[float], None],  # noqa: F811 - the fixture imported above
) -> None:
    agent = make_agent(timeout_seconds=600, memory_extraction_enabled=True)
    extractions: list[RecordedRequest] = []
    answer = {"memories": [{"type": "fact", "content": "Ola asked for a call back on Monday."}]}

    def respond(request: RecordedRequest) -> Step:
        if not (request.system or "").startswith(EXTRACTOR):
            return text_reply("Noted.")
        extractions.append(request)
        # The first extraction answers slowly: PostgreSQL restarts while the task waits for
        # it, and the task's next query meets a connection that died with the old server.
        return Reply(text=json.dumps(answer), latency=6.0 if len(extractions) == 1 else None)

    fake_llm_server.set_responder(respond, key=agent.llm_model)
    worker = Worker(concurrency=4).start()
    try:
        (run,) = _start(agent, 1)
        assert wait_for(run, timeout=60).status in TERMINAL
        deadline = time.monotonic() + 60
        while not extractions:
            assert time.monotonic() < deadline, "the after-run task never asked the model"
            time.sleep(0.05)
        restart_postgres(2.0)
        # No reaper here: the task itself must come back, not a later re-send of it.
        deadline = time.monotonic() + 120
        while not _after_run_done(run):
            assert time.monotonic() < deadline, worker.output()[-4000:]
            time.sleep(0.2)
        while _owed([run]):
            assert time.monotonic() < deadline, "after-run work done but still recorded as owed"
            time.sleep(0.1)
    finally:
        worker.stop()

    log = worker.output()
    assert re.search(r"memory\.after_run\[[^\]]+\] retry: .*OperationalError", log), log[-4000:]
    with tenancy.agency_context(agent.agency_id):
        (memory,) = Memory.objects.filter(agent=agent)  # stored once, although asked twice
    assert memory.content == answer["memories"][0]["content"]
