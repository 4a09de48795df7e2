"""Worker heartbeats and what the lease reaper does with them, and with a broker restart.

A process's heartbeat row (ops.WorkerHeartbeat) is written through a connection of its own; the
reaper hands on the runs of a process whose row went quiet, was marked stopped, or belongs to a
later process with the same host and pid, and leaves every other run to its lease; a process lost
that way also has every pending run sent again. After the broker restarted, every pending run and
unprocessed event is sent again at the next tick. What the reaper sends is read from Celery's
publish signal and stops at the broker's door."""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from celery.signals import after_task_publish
from django.db.models.functions import Now
from django.utils import timezone
from kombu import Producer

from agents import tasks
from agents.models import Execution, ExecutionStatus
from agents.runtime.loop import worker_id
from agents.tasks import reap_expired_leases
from core import tenancy
from core.models import Event
from ops import broker, heartbeat
from ops.models import BrokerState, WorkerHeartbeat
from tests.agents.factories import ExecutionFactory
from tests.core.factories import EventFactory


@pytest.fixture
def published() -> Iterator[list[tuple[str, str]]]:
    """(task name, first argument) of every task this process publishes from now on; nothing
    reaches the broker (the session's worker must not take these rows' deliveries)."""
    sent: list[tuple[str, str]] = []

    def record(sender: Any = None, body: Any = None, **kwargs: Any) -> None:
        args, _kwargs, _embed = body  # protocol 2
        sent.append((str(sender), str(args[0])))

    after_task_publish.connect(record, weak=False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Producer, "publish", lambda self, *args, **kwargs: None)
        yield sent
    after_task_publish.disconnect(record)


def _sent_runs(published: list[tuple[str, str]]) -> list[str]:
    return [arg for name, arg in published if name == "agents.run_execution"]


def _host() -> str:
    return f"host-{uuid.uuid4().hex[:8]}"


def _running(owner: str, *, lease_seconds: float = 300) -> Execution:
    return ExecutionFactory.create(
        status=ExecutionStatus.RUNNING,
        lease_owner=owner,
        lease_expires_at=timezone.now() + datetime.timedelta(seconds=lease_seconds),
    )


def _beat(process: str, *, seen_ago: float = 0, stopped: bool = False, **times: Any) -> None:
    """A heartbeat row: by default a process beating for an hour, last seen ``seen_ago``."""
    now = timezone.now()
    an_hour_ago = now - datetime.timedelta(hours=1)
    WorkerHeartbeat.objects.create(
        process=process,
        started_at=times.get("started_at", an_hour_ago),
        beating_since=times.get("beating_since", an_hour_ago),
        last_seen=now - datetime.timedelta(seconds=seen_ago),
        stopped_at=now if stopped else None,
    )


def _fetch(execution: Execution) -> Execution:
    with tenancy.platform_context():
        return Execution.objects.get(pk=execution.pk)


def test_the_heartbeat_process_is_the_prefix_of_the_runtime_worker_id() -> None:
    assert worker_id().startswith(heartbeat.process_id() + ":")
    assert worker_id().count(":") == heartbeat.process_id().count(":") + 1


@pytest.mark.django_db
def test_the_reaper_hands_on_the_runs_of_a_dead_worker_and_leaves_the_others_to_their_lease(
    published: list[tuple[str, str]],
) -> None:
    host = _host()
    quiet = _running(f"{host}:1:77")
    _beat(f"{host}:1", seen_ago=60)
    alive = _running(f"{host}:2:77")
    _beat(f"{host}:2", seen_ago=1)
    no_heartbeat = _running(f"{host}:3:77")  # an older worker, or one whose heartbeat never ran
    stopped = _running(f"{host}:4:77")
    _beat(f"{host}:4", stopped=True)
    # A later process with the same host and pid (a restarted container) started after the
    # run's last write: the run is its dead predecessor's.
    reborn = _running(f"{host}:5:77")
    _beat(f"{host}:5", started_at=reborn.updated_at + datetime.timedelta(seconds=5))
    expired = _running(f"{host}:6:77", lease_seconds=-1)  # no heartbeat row, lease ran out

    reap_expired_leases()

    sent = _sent_runs(published)
    for run in (quiet, stopped, reborn, expired):
        assert sent.count(str(run.id)) == 1
        released = _fetch(run)
        assert released.status == ExecutionStatus.RUNNING
        assert released.lease_owner == ""  # the claim takes a released run at once
    for run in (alive, no_heartbeat):
        assert str(run.id) not in sent
        assert _fetch(run).lease_owner == run.lease_owner

    reap_expired_leases()  # released, in their grace period: not sent again
    assert len(_sent_runs(published)) == len(sent)


@pytest.mark.django_db
def test_when_a_worker_is_lost_every_pending_run_is_sent_again_at_once_and_once(
    published: list[tuple[str, str]],
) -> None:
    """The lost worker may have held any of them, received but not claimed: its messages stay
    with the broker until the visibility timeout (docs/decisions/0008-run-delivery.md)."""
    host = _host()
    _beat(f"{host}:1", seen_ago=60)  # killed
    _beat(f"{host}:2", seen_ago=1)  # kept beating: a witness
    runs = [ExecutionFactory.create(status=ExecutionStatus.PENDING) for _ in range(2)]

    reap_expired_leases()

    sent = _sent_runs(published)
    for run in runs:  # just written: the periodic re-send would have left them for 120 s
        assert sent.count(str(run.id)) == 1
    assert WorkerHeartbeat.objects.get(process=f"{host}:1").stopped_at is not None
    assert WorkerHeartbeat.objects.get(process=f"{host}:2").stopped_at is None
    reap_expired_leases()  # the loss was handled: nothing more
    assert len(_sent_runs(published)) == len(sent)


@pytest.mark.django_db
def test_after_a_database_outage_quiet_workers_keep_their_runs_until_they_beat_again(
    published: list[tuple[str, str]],
) -> None:
    """Every heartbeat went quiet at once (the database was down): nobody beat throughout the
    timeout, so nobody is taken for dead; a stopped process still is."""
    host = _host()
    # The other processes of the session just came back too (rolled back with the test).
    WorkerHeartbeat.objects.update(beating_since=Now())
    quiet = _running(f"{host}:1:77")
    _beat(f"{host}:1", seen_ago=60)
    _running(f"{host}:2:77")
    _beat(f"{host}:2", seen_ago=1, beating_since=timezone.now())  # back a moment ago
    stopped = _running(f"{host}:3:77")
    _beat(f"{host}:3", stopped=True)

    reap_expired_leases()

    sent = _sent_runs(published)
    assert str(quiet.id) not in sent
    assert _fetch(quiet).lease_owner == quiet.lease_owner
    assert sent.count(str(stopped.id)) == 1


@pytest.mark.django_db
def test_the_reaper_leaves_runs_a_live_worker_claimed_after_it_started(
    published: list[tuple[str, str]],
) -> None:
    host = _host()
    run = _running(f"{host}:9:1")
    _beat(f"{host}:9", started_at=run.updated_at - datetime.timedelta(seconds=30))
    reap_expired_leases()
    assert str(run.id) not in _sent_runs(published)


@pytest.fixture
def own_row(live_db: None) -> Iterator[None]:
    """This process's heartbeat row, written for real (committed), removed afterwards."""
    yield
    WorkerHeartbeat.objects.filter(process=heartbeat.process_id()).delete()


def test_a_heartbeat_writes_its_row_and_marks_it_stopped_on_a_clean_stop(own_row: None) -> None:
    beat = heartbeat.Heartbeat(interval=0.05)
    assert beat.beat()
    row = WorkerHeartbeat.objects.get(process=heartbeat.process_id())
    assert row.stopped_at is None
    assert row.started_at < row.last_seen  # the process began before it could beat
    streak = row.beating_since
    assert beat.beat()
    row.refresh_from_db()
    assert row.beating_since == streak  # beating on
    WorkerHeartbeat.objects.filter(pk=row.pk).update(
        last_seen=row.last_seen - datetime.timedelta(seconds=60)
    )
    assert beat.beat()  # after a pause longer than a streak allows (an outage): a new streak
    row.refresh_from_db()
    assert row.beating_since > streak
    beat.start()
    beat.stop()
    assert not beat.is_alive()
    row.refresh_from_db()
    assert row.stopped_at is not None
    assert beat.beat()  # the same process beating again (a restart of its worker) is alive
    row.refresh_from_db()
    assert row.stopped_at is None
    beat.stop()


def test_a_heartbeat_that_cannot_reach_the_database_keeps_the_worker_alive(
    own_row: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    beat = heartbeat.Heartbeat(interval=0.05)
    monkeypatch.setattr(
        heartbeat, "_conninfo", lambda: "host=127.0.0.1 port=1 dbname=x connect_timeout=1"
    )
    assert beat.beat() is False  # logged, not raised
    beat.start()
    beat.join(0.3)
    assert beat.is_alive()  # the thread goes on beating
    monkeypatch.undo()
    deadline = timezone.now() + datetime.timedelta(seconds=10)
    while not WorkerHeartbeat.objects.filter(process=beat.process, stopped_at=None).exists():
        assert timezone.now() < deadline, "the heartbeat never came back"
        time.sleep(0.05)
    beat.stop()


@pytest.fixture
def broker_run_id(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The broker's run_id as the reaper reads it: the test changes it to "restart" Redis."""
    current = [uuid.uuid4().hex]
    monkeypatch.setattr(broker, "current_run_id", lambda: current[0])
    monkeypatch.setattr(broker, "_known", None)
    return current


@pytest.mark.django_db
def test_after_a_broker_restart_every_pending_run_and_event_is_sent_again_at_once(
    published: list[tuple[str, str]],
    broker_run_id: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tasks, "REAPER_BATCH", 2)  # more than a batch of each: all go
    runs = [ExecutionFactory.create(status=ExecutionStatus.PENDING) for _ in range(3)]
    events = [EventFactory.create() for _ in range(3)]  # unprocessed, just written
    with tenancy.platform_context():
        assert not Event.objects.filter(pk__in=[e.pk for e in events], processed_at__isnull=False)

    reap_expired_leases()  # the first look only records the broker
    reap_expired_leases()
    assert BrokerState.objects.get(name=broker.STATE_NAME).run_id == broker_run_id[0]
    assert not {str(run.id) for run in runs} & set(_sent_runs(published))

    broker_run_id[0] = uuid.uuid4().hex  # restarted: its queues are empty
    reap_expired_leases()
    sent = _sent_runs(published)
    for run in runs:
        assert sent.count(str(run.id)) == 1
    dispatched = [arg for name, arg in published if name == "agents.dispatch_event"]
    for event in events:
        assert dispatched.count(str(event.id)) == 1
    assert BrokerState.objects.get(name=broker.STATE_NAME).run_id == broker_run_id[0]

    count = len(published)
    reap_expired_leases()  # the same broker: nothing more
    assert len(published) == count
    # Only committed rows are trusted in memory: this test's are rolled back, so a later test
    # (or tick) reads the database again instead of taking the broker for known.
    assert broker._known is None
