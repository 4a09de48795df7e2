"""Runs through a PostgreSQL restart and through a worker killed with -9: outcomes and recovery.

PostgreSQL: ``--runs`` runs (each: a model call of ``--latency`` s, ``task_create``, a final
answer) are started on a real worker; while they wait for the model, PostgreSQL is stopped
(fast shutdown, as an operator does) for ``--down`` s and started again; then ``--runs`` more
runs are started. Worker: ``--runs`` runs are started on a worker that is killed with -9 while
they wait for the model; a second worker and beat's reaper (called here every
``AGENTDESK_REAPER_INTERVAL_SECONDS``, as beat does) must finish them. For each: runs, outcomes
(completed / failed / not finished within ``--deadline`` s), side effects applied twice (tasks
created beyond one per run), and the seconds from the failure's end (PostgreSQL back, or the
kill) to the last run's completion.

    .venv/bin/python -m bench.outage_recovery [--runs 50 --latency 1.0 --down 8 --deadline 300]
"""

from __future__ import annotations

import argparse
import datetime
import json
import time
from typing import Any

from django.conf import settings
from django.db import connections
from django.utils import timezone

from agents.models import TERMINAL_STATUSES, Execution, ExecutionStatus
from agents.services import execution_create
from agents.tasks import reap_expired_leases
from bench import common
from core import database, embedded, tenancy
from crm.models import Task


def responder(request: Any) -> Any:
    """Stateless (it serves from its own process): one task, then the answer."""
    from agents.llm.fake_server.script import text_reply, tool_call_reply  # noqa: PLC0415

    if request.assistant_turns == 0:
        return tool_call_reply("task_create", {"title": "Call the customer back"})
    return text_reply("Done.")


def _pg_ctl(*args: str) -> None:
    from pgserver._commands import pg_ctl  # type: ignore[attr-defined]  # noqa: PLC0415

    user = "pgserver" if embedded.os.geteuid() == 0 else None
    pg_ctl(["-w", *args], pgdata=embedded.data_dir() / "pg", user=user, timeout=60)


def _start(agent: Any, n: int) -> list[Any]:
    with tenancy.agency_context(agent.agency_id):
        return [execution_create(agent=agent, input="Call back.") for _ in range(n)]


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
        rows = list(Execution.objects.filter(pk__in=ids).values("status", "completed_at"))
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
    }


def postgres_restart(server: Any, *, runs: int, down: float, deadline: float) -> dict[str, Any]:
    agent = common.make_agent(server, allowed_tools=["task_create"])
    worker = common.worker(concurrency=64).start()
    try:
        before = _start(agent, runs)
        time.sleep(0.5)  # claimed, waiting for the model
        connections.close_all()
        _pg_ctl("-m", "fast", "stop")
        time.sleep(down)
        _pg_ctl("restart")
        back = time.monotonic()
        connections.close_all()
        database.wait_until_available(timeout=30)
        after = _start(agent, runs)
        result = _settle(agent, before + after, back, deadline)
    finally:
        worker.stop()
    return {"down_s": down, **result}


def worker_killed(server: Any, *, runs: int, deadline: float) -> dict[str, Any]:
    agent = common.make_agent(server, allowed_tools=["task_create"])
    doomed = common.worker(concurrency=64, AGENTDESK_LEASE_SECONDS="300").start()
    try:
        before = _start(agent, runs)
        time.sleep(0.5)  # claimed by the doomed worker, waiting for the model
        doomed.kill()
        killed = time.monotonic()
    finally:
        doomed.kill()
    survivor = common.worker(concurrency=64).start()
    try:
        result = _settle(agent, before, killed, deadline)
    finally:
        survivor.stop()
    return {"lease_s": 300, **result}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--down", type=float, default=8.0)
    parser.add_argument("--deadline", type=float, default=300.0)
    args = parser.parse_args()
    if embedded.running_pids()["postgres"] is None:
        raise SystemExit("needs the embedded PostgreSQL of this checkout (it is restarted)")
    common.create_database()
    facts = common.machine_facts()
    try:
        with common.FakeServerProcess(responder, latency=args.latency) as server:
            report = {
                "machine": facts.as_dict(),
                "postgres_restart": postgres_restart(
                    server, runs=args.runs, down=args.down, deadline=args.deadline
                ),
                "worker_killed": worker_killed(server, runs=args.runs, deadline=args.deadline),
            }
    finally:
        common.drop_database()
    print(facts.describe())
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
