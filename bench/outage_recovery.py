"""Runs through a PostgreSQL restart, a worker killed with -9 and a Redis crash: outcomes and
recovery.

PostgreSQL: ``--runs`` runs (each: a model call of ``--latency`` s, ``task_create``, a final
answer) are started on a real worker; while they wait for the model, PostgreSQL is stopped
(fast shutdown, as an operator does) for ``--down`` s and started again; then ``--runs`` more
runs are started. Worker: ``--runs`` runs are started on two workers, one of which is killed
with -9 while they wait for the model; the other and beat's reaper must finish its runs.
Redis: ``--runs`` runs are started on a worker of ``--redis-threads`` threads (so some are in
flight, the rest queued in Redis); while the first wait for the model the embedded
redis-server is killed with -9 (what it held since its last snapshot is gone: the queued
messages), started again on the same port after ``--redis-down`` s, and ``--runs`` more runs
(of another agency) are started.

In every scenario beat's reaper is called every ``AGENTDESK_REAPER_INTERVAL_SECONDS`` (10 s by
default), as beat calls it, the first time one interval after the failure ended. For each:
runs, outcomes (completed / failed / not finished within ``--deadline`` s, with the status and
error of every run that did not complete), side effects applied twice or missing (tasks created
beyond or short of one per run), and the seconds from the failure's end (PostgreSQL or Redis
back, or the kill) to the last run's completion.

Everything it stops and starts is the embedded servers of ``AGENTDESK_DATA_DIR`` (default
``.data/``): run it on a data folder of its own when anything else uses those.

    .venv/bin/python -m bench.outage_recovery [--runs 50 --latency 1.0 --down 8 --redis-down 3
        --redis-threads 16 --deadline 300 --only postgres|worker|redis]
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import signal
import time
from typing import Any

from django.conf import settings
from django.db import connections
from django.utils import timezone

from agents.models import TERMINAL_STATUSES, Execution, ExecutionStatus
from agents.services import execution_create
from agents.tasks import reap_expired_leases
from bench import common
from core import database, tenancy
from crm.models import Task
from devkit import embedded


def responder(request: Any) -> Any:
    """Stateless (it serves from its own process): one task, then the answer."""
    from devkit.fake_server.script import text_reply, tool_call_reply  # noqa: PLC0415

    if request.assistant_turns == 0:
        return tool_call_reply("task_create", {"title": "Call the customer back"})
    return text_reply("Done.")


def _check_embedded() -> None:
    """The settings' database and broker must be the embedded servers this bench stops and
    starts (those of ``AGENTDESK_DATA_DIR``), not configured ones or another data folder's."""
    services = embedded.locate()
    if services.postgres_pid is None or services.redis_pid is None:
        raise SystemExit(f"needs the embedded servers of {embedded.data_dir()} running")
    database = settings.DATABASES["default"]
    in_use = (database["HOST"], int(database["PORT"]), settings.CELERY_BROKER_URL)
    if in_use != (services.postgres_socket_dir, services.postgres_port, services.redis_url):
        raise SystemExit(f"the settings do not use the embedded servers of {embedded.data_dir()}")


def _start(agent: Any, n: int) -> list[Any]:
    with tenancy.agency_context(agent.agency_id):
        return [execution_create(agent=agent, input="Call back.") for _ in range(n)]


def _wait_in_flight(server: Any, calls: int, timeout: float = 10) -> None:
    """Until ``calls`` model calls were in flight together (the fake server counts them since
    ``reset_max_in_flight``), or ``timeout``: the statuses at the failure tell how far it got."""
    limit = time.monotonic() + timeout
    while server.max_in_flight < calls and time.monotonic() < limit:
        time.sleep(0.02)


def _statuses(agent: Any, runs: list[Any]) -> dict[str, int]:
    with tenancy.agency_context(agent.agency_id):
        found = Execution.objects.filter(pk__in=[run.id for run in runs]).values_list("status")
        return dict(collections.Counter(status for (status,) in found))


def _settle(agent: Any, runs: list[Any], since: float, deadline: float) -> dict[str, Any]:
    """Wait for every run to end (calling the reaper as beat does); then count."""
    ids = [run.id for run in runs]
    reap_every = settings.AGENTDESK_REAPER_INTERVAL_SECONDS
    next_reap = time.monotonic() + reap_every
    limit = time.monotonic() + deadline
    while time.monotonic() < limit:
        with tenancy.agency_context(agent.agency_id):
            open_runs = Execution.objects.filter(pk__in=ids).exclude(status__in=TERMINAL_STATUSES)
            if not open_runs.exists():
                break
        if time.monotonic() >= next_reap:
            reap_expired_leases()
            next_reap = time.monotonic() + reap_every
        time.sleep(0.1)
    with tenancy.agency_context(agent.agency_id):
        rows = list(Execution.objects.filter(pk__in=ids).values("status", "error", "completed_at"))
        tasks = Task.objects.filter(agency_id=agent.agency_id).count()
    done = [row["completed_at"] for row in rows if row["completed_at"] is not None]
    back_at = timezone.now() - datetime.timedelta(seconds=time.monotonic() - since)
    return {
        "runs": len(rows),
        "completed": sum(row["status"] == ExecutionStatus.COMPLETED for row in rows),
        "failed": sum(row["status"] == ExecutionStatus.FAILED for row in rows),
        "not_finished": sum(row["status"] not in TERMINAL_STATUSES for row in rows),
        "side_effects_twice": max(0, tasks - len(rows)),
        "side_effects_missing": max(0, len(rows) - tasks),
        "recovered_s": round((max(done) - back_at).total_seconds(), 2) if done else None,
        # Every run that did not complete, by status and error: a real failure to look into.
        "not_completed": [
            {"status": status, "error": error, "runs": count}
            for (status, error), count in collections.Counter(
                (row["status"], row["error"][:500])
                for row in rows
                if row["status"] != ExecutionStatus.COMPLETED
            ).items()
        ],
    }


def postgres_restart(server: Any, *, runs: int, down: float, deadline: float) -> dict[str, Any]:
    agent = common.make_agent(server, allowed_tools=["task_create"])
    worker = common.worker(concurrency=64).start()
    try:
        server.reset_max_in_flight()
        before = _start(agent, runs)
        _wait_in_flight(server, runs)  # claimed, waiting for the model
        at_failure = _statuses(agent, before)
        connections.close_all()
        embedded.stop(["postgres"])  # a fast shutdown, as an operator's
        time.sleep(down)
        embedded.ensure_running(["postgres"])  # at its saved address
        back = time.monotonic()
        connections.close_all()
        database.wait_until_available(timeout=30)
        after = _start(agent, runs)
        result = _settle(agent, before + after, back, deadline)
    finally:
        worker.stop()
    return {"down_s": down, "statuses_at_failure": at_failure, **result}


def worker_killed(server: Any, *, runs: int, deadline: float) -> dict[str, Any]:
    """Two workers take the runs; one is killed with -9. Its runs must go on on the other, which
    runs already (a worker started in its place would add its start-up, 6-25 s on a loaded
    2-core machine, to the figure). The killed one's leases (300 s) outlive the measurement:
    only its stopped heartbeat can hand its runs on."""
    agent = common.make_agent(server, allowed_tools=["task_create"])
    survivor = common.worker(concurrency=64).start()
    doomed = common.worker(concurrency=64, AGENTDESK_LEASE_SECONDS="300").start()
    try:
        server.reset_max_in_flight()
        before = _start(agent, runs)
        _wait_in_flight(server, runs)  # claimed by either worker, waiting for the model
        at_failure = _statuses(agent, before)
        assert doomed.process is not None
        on_killed = _held_by(agent, before, doomed.process.pid)
        doomed.kill()
        killed = time.monotonic()
        result = _settle(agent, before, killed, deadline)
    finally:
        doomed.kill()
        survivor.stop()
    return {
        "lease_s": 300,
        "statuses_at_failure": at_failure,
        "runs_on_killed_worker": on_killed,
        **result,
    }


def _held_by(agent: Any, runs: list[Any], pid: int) -> int:
    """Runs whose lease a worker process holds (``host:pid:thread``, agents.runtime.loop)."""
    with tenancy.agency_context(agent.agency_id):
        owners = Execution.objects.filter(pk__in=[run.id for run in runs]).values_list(
            "lease_owner", flat=True
        )
        return sum(owner.split(":")[1:2] == [str(pid)] for owner in owners)


def _crash_redis(down: float) -> None:
    """SIGKILL the embedded redis-server (no snapshot on the way out), wait until its port is
    closed, then ``down`` seconds, then start it again: at its saved port, which every running
    process still uses (devkit.embedded)."""
    services = embedded.locate()
    if services.redis_pid is None:
        raise RuntimeError("the embedded Redis is not running")
    os.kill(services.redis_pid, signal.SIGKILL)
    limit = time.monotonic() + 10
    while embedded.port_open(services.redis_port):
        if time.monotonic() > limit:
            raise RuntimeError("Redis still listens after SIGKILL")
        time.sleep(0.02)
    time.sleep(down)
    if embedded.ensure_running(["redis"]).redis_port != services.redis_port:
        raise RuntimeError("the embedded Redis came back on another port")


def redis_crash(
    server: Any, *, runs: int, threads: int, down: float, deadline: float
) -> dict[str, Any]:
    agent = common.make_agent(server, allowed_tools=["task_create"])
    late = common.make_agent(server, allowed_tools=["task_create"])  # its own tasks to count
    worker = common.worker(concurrency=threads).start()
    try:
        reap_expired_leases()  # the reaper has seen this broker before it goes, as beat has
        server.reset_max_in_flight()
        before = _start(agent, runs)
        _wait_in_flight(server, min(threads, runs))  # the rest wait in Redis
        at_failure = _statuses(agent, before)
        _crash_redis(down)
        back = time.monotonic()
        after = _start(late, runs)
        lost = _settle(agent, before, back, deadline)
        started_after = _settle(late, after, back, deadline)
        assert worker.process is not None
        alive = worker.process.poll() is None
        saw_it = "Connection to broker lost" in worker.output()
    finally:
        worker.stop()
    return {
        "down_s": down,
        "worker_threads": threads,
        "statuses_at_failure": at_failure,
        "worker_alive_after": alive,
        "worker_saw_broker_lost": saw_it,
        "in_flight_or_queued": lost,
        "started_once_back": started_after,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--down", type=float, default=8.0)
    parser.add_argument("--redis-down", type=float, default=3.0)
    parser.add_argument("--redis-threads", type=int, default=16)
    parser.add_argument("--deadline", type=float, default=300.0)
    parser.add_argument("--only", choices=["postgres", "worker", "redis"])
    args = parser.parse_args()
    _check_embedded()
    common.create_database()
    facts = common.machine_facts()
    report: dict[str, Any] = {
        "machine": facts.as_dict(),
        "reaper_interval_s": settings.AGENTDESK_REAPER_INTERVAL_SECONDS,
    }
    try:
        with common.FakeServerProcess(responder, latency=args.latency) as server:
            if args.only in (None, "postgres"):
                report["postgres_restart"] = postgres_restart(
                    server, runs=args.runs, down=args.down, deadline=args.deadline
                )
            if args.only in (None, "worker"):
                report["worker_killed"] = worker_killed(
                    server, runs=args.runs, deadline=args.deadline
                )
            if args.only in (None, "redis"):
                report["redis_crash"] = redis_crash(
                    server,
                    runs=args.runs,
                    threads=args.redis_threads,
                    down=args.redis_down,
                    deadline=args.deadline,
                )
    finally:
        common.drop_database()
    print(facts.describe())
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
