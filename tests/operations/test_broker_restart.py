"""Redis crashes (SIGKILL: what it held since its last snapshot is gone), or is restarted by an
operator, and comes back on the same port under a batch of runs, some in flight on the worker,
some queued: every run completes, none twice, none stuck, the worker process is still alive
afterwards, and runs started once Redis is back complete on it. The reaper is called every
couple of seconds, as beat calls it; it sees the broker's new run_id and sends every pending run
again at once.

Real embedded Redis (the session's own, restarted inside the test and always back on its port
when the test ends), real worker process, real embedded PostgreSQL, fake provider server."""

from __future__ import annotations

import datetime
import logging
import os
import signal
import time
from collections.abc import Callable, Iterator

import pytest
from django.conf import settings
from django.utils import timezone

from agents.models import Agent, Execution, ExecutionStatus
from agents.services import execution_create
from agents.tasks import reap_expired_leases
from core import tenancy
from crm.models import Contact, Note
from devkit import embedded
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import Reply, by_turn, tool_call_reply
from tests.processes import TERMINAL, Worker

# It takes down the Redis every test uses: run on its own (`make test`: on servers of its own,
# tests/run.py).
pytestmark = [pytest.mark.slow, pytest.mark.serial]
logger = logging.getLogger(__name__)
CONCURRENCY = 4
BEFORE = 12  # runs started before Redis goes down: 4 in flight, 8 queued in Redis
AFTER = 4  # runs started once Redis is back
DOWN_SECONDS = 3.0
BEAT_SECONDS = 2.0  # how often the test calls the reaper, as beat would


def _redis_port() -> int:
    return int((embedded.data_dir() / "redis" / "port").read_text())


def _redis_back(port: int) -> None:
    """The embedded Redis started again if it is down: at its saved address, which running
    processes know (devkit.embedded)."""
    embedded.ensure_running(["redis"])
    assert _redis_port() == port, "the embedded Redis came back on another port"


@pytest.fixture
def restart_redis() -> Iterator[Callable[[str], datetime.datetime]]:
    """Take the session's embedded Redis down and back, on the same port: ``"crash"`` kills it
    with SIGKILL and starts it again after DOWN_SECONDS (what it held since its last snapshot
    is gone); ``"restart"`` is an operator's ``manage.py embedded restart redis`` (SIGTERM: it
    saves its dump first). Returns when it went down. Whatever happens in the test, Redis is
    back on that port when it ends."""
    pid = embedded.running_pids()["redis"]
    if pid is None:
        pytest.skip("the suite does not run on the embedded Redis of this checkout")
    port = _redis_port()
    if not str(settings.REDIS_URL).startswith(f"redis://127.0.0.1:{port}/"):
        pytest.skip("the suite's Redis is not the embedded one")

    def restart(how: str) -> datetime.datetime:
        down_at = timezone.now()
        if how == "restart":
            embedded.restart(["redis"])
        else:
            current = embedded.running_pids()["redis"]
            assert current is not None
            os.kill(current, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while embedded.port_open(port):
                assert time.monotonic() < deadline, "Redis still listens after SIGKILL"
                time.sleep(0.02)
            time.sleep(DOWN_SECONDS)
        _redis_back(port)
        return down_at

    yield restart
    if embedded.running_pids()["redis"] is None or not embedded.port_open(port):
        _redis_back(port)


def _agent(make_agent: Callable[..., Agent], server: FakeProviderServer) -> tuple[Agent, Contact]:
    agent = make_agent(allowed_tools=["crm_*"], timeout_seconds=600)
    with tenancy.agency_context(agent.agency_id):
        contact = Contact.objects.create(agency_id=agent.agency_id, first_name="Ola")
    note = tool_call_reply("crm_add_note", {"contact_id": str(contact.id), "content": "Call."})
    server.set_responder(
        # The first reply takes a while: Redis goes down while the first runs wait for it.
        by_turn(Reply(tool_calls=note.tool_calls, latency=2.0), Reply(text="Noted.")),
        key=agent.llm_model,
    )
    return agent, contact


def _start(agent: Agent, n: int) -> list[Execution]:
    with tenancy.agency_context(agent.agency_id):
        runs = [execution_create(agent=agent, input="Note the call.") for _ in range(n)]
    assert all(run is not None for run in runs)
    return [run for run in runs if run is not None]


def _reload(runs: list[Execution]) -> list[Execution]:
    with tenancy.platform_context():
        found = Execution.objects.in_bulk([run.pk for run in runs])
    return [found[run.pk] for run in runs]


def _why_it_exited(log: str) -> str:
    """The worker's first critical error (the cause) and the end of its log (its shutdown)."""
    first = log.find("CRITICAL")
    return (log[first : first + 4000] if first >= 0 else "") + "\n...\n" + log[-2000:]


def _finish(runs: list[Execution], timeout: float = 120) -> list[Execution]:
    """Call the reaper as beat would until every run has ended."""
    deadline = time.monotonic() + timeout
    while True:
        current = _reload(runs)
        pending = [run for run in current if run.status not in TERMINAL]
        if not pending:
            return current
        assert time.monotonic() < deadline, [(run.id, run.status) for run in pending]
        reap_expired_leases()
        time.sleep(BEAT_SECONDS)


@pytest.mark.parametrize("how", ["crash", "restart"])
def test_runs_survive_a_redis_restart_and_the_worker_goes_on_after_it(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    restart_redis: Callable[[str], datetime.datetime],
    how: str,
) -> None:
    agent, contact = _agent(make_agent, fake_llm_server)
    # Started as production starts it (`celery -A config worker`: mingle, gossip and the control
    # queue's fanout channel too), its concurrency set the way an operator sets it.
    worker = Worker(
        plain=True, CELERY_WORKER_CONCURRENCY=str(CONCURRENCY), AGENTDESK_LEASE_SECONDS="300"
    ).start()
    try:
        reap_expired_leases()  # the reaper knows the broker before it goes down
        before = _start(agent, BEFORE)
        deadline = time.monotonic() + 30
        while len(fake_llm_server.requests_for(agent.llm_model)) < CONCURRENCY:
            assert time.monotonic() < deadline, "the runs never called the model"
            time.sleep(0.05)
        down_at = restart_redis(how)
        back_at = timezone.now()
        finished = _finish(before)
        after = _start(agent, AFTER)
        finished_after = _finish(after)
        alive = worker.process is not None and worker.process.poll() is None
    finally:
        worker.stop()

    assert alive, _why_it_exited(worker.output())
    assert "Connection to broker lost" in worker.output()  # it did see Redis go
    runs = finished + finished_after
    assert [run.status for run in runs] == [ExecutionStatus.COMPLETED] * len(runs), [
        (run.status, run.error) for run in runs
    ]
    with tenancy.agency_context(agent.agency_id):
        assert Note.objects.filter(contact=contact).count() == len(runs)  # each exactly once
    last = max(run.completed_at for run in finished if run.completed_at is not None)
    logger.warning(
        "broker %s: %d runs in flight or queued completed, the last %.1f s after Redis went "
        "down (%.1f s after it was back); %d runs started after it completed",
        how,
        len(finished),
        (last - down_at).total_seconds(),
        (last - back_at).total_seconds(),
        len(finished_after),
    )


def test_a_worker_never_gives_up_on_its_broker_nor_cancels_its_runs_when_it_goes() -> None:
    """Celery's defaults would have the worker exit after 100 failed reconnections (the
    "Unrecoverable error: OperationalError" exit, reproduced with 2) and, from Celery 6, cancel
    its runs in flight on a connection loss."""
    from config.celery_app import app
    from config.celery_consumer import BrokerConsumer

    assert app.conf.broker_connection_retry is True
    assert app.conf.broker_connection_max_retries is None  # forever
    assert app.conf.worker_cancel_long_running_tasks_on_connection_loss is False
    assert app.conf.worker_consumer == f"{BrokerConsumer.__module__}:{BrokerConsumer.__name__}"


def test_an_acknowledgement_whose_connection_is_gone_is_dropped_not_fatal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A task that ends while Redis is down queues its acknowledgement on the event loop; the
    consumer closes that connection before the loop runs it. kombu then raises AttributeError,
    which Celery took for an unrecoverable error (the worker exited on CI). The consumer drops
    such an acknowledgement; any other failure of an acknowledgement still raises."""
    from kombu import Connection
    from kombu.asynchronous import Hub
    from kombu.message import Message

    from config.celery_consumer import BrokerConsumer

    connection = Connection(settings.CELERY_BROKER_URL)
    message = Message(body=b"{}", channel=connection.channel(), delivery_tag="t1")
    connection.close()
    with pytest.raises(AttributeError):  # what kombu does on its own
        message.ack_log_error(logger, connection.connection_errors)

    consumer = BrokerConsumer.__new__(BrokerConsumer)  # only its event loop is needed here
    consumer.hub = Hub()
    try:
        consumer.call_soon_ack(message.ack_log_error, logger, connection.connection_errors)
        with caplog.at_level(logging.WARNING, logger="config.celery_consumer"):
            (queued,) = consumer.hub._pop_ready()
            queued()  # raised AttributeError before
        assert "acknowledgement of message t1 dropped" in caplog.text

        live = Connection(settings.CELERY_BROKER_URL)
        try:
            acked = Message(body=b"{}", channel=live.channel(), delivery_tag="t2")
            acked.ack()
            consumer.call_soon_ack(acked.ack_log_error, logger, live.connection_errors)
            (queued,) = consumer.hub._pop_ready()
            with pytest.raises(acked.MessageStateError):  # a live channel's failure still raises
                queued()
        finally:
            live.close()
    finally:
        consumer.hub.close()
