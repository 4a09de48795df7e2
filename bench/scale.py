"""Steps per second and runs in flight with 1, 2 and 4 worker processes on this machine, and what
each step costs PostgreSQL and Redis: the figures a cluster is sized from (bench/README.md,
"Sizing a cluster"). Issue 29.

Each setting gets fresh worker processes (``--threads`` each, as production's pool), the same
database, and ``--runs`` runs spread over ``--agents`` agents (a cluster serves many agents: the
agent's row, which each run's end updates, is a lock its runs queue on), each run ``--iterations``
ReAct iterations of ``crm_get_contact`` against the fake provider in its own process
(``--latency`` seconds per model call; 0: the CPU-bound case).

    .venv/bin/python -m bench.scale [--workers 1,2,4 --threads 16 --runs 120 --iterations 10
                                     --agents 8 --latency 0 --repeat 1]
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from typing import Any

import psycopg
from django.conf import settings

from agents.models import Execution, ExecutionStep
from agents.models.after_run import AfterRunWork
from agents.services import execution_create
from bench import common
from config.env import service_urls
from core import db_roles, tenancy
from crm.models import Contact
from devkit import embedded
from devkit.fake_server.script import by_turn, text_reply, tool_call_reply

TERMINAL = ("completed", "failed", "cancelled", "timed_out")


class Sampler(threading.Thread):
    """Every ``interval`` s, on a connection of its own: the runs running, the database's
    backends that are active, and those of them waiting for a lock (a row lock: two runs' ends
    on one agent) or for the WAL to be flushed to disk (commits queueing on the disk)."""

    def __init__(self, interval: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.interval = interval
        self.samples: list[tuple[int, int, int, int]] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        # The superuser where there is one: others' backends show their state only to it.
        admin = service_urls().database_admin or common.database_conninfo("owner")
        name = settings.DATABASES["owner"]["NAME"]
        with psycopg.connect(db_roles.with_database(admin, name)) as conn:
            while not self.stopping.wait(self.interval):
                # Every agency's runs (row-level security: core/rls.py), in one transaction.
                conn.execute("SELECT set_config('app.all_agencies', 'on', true)")
                row = conn.execute(
                    "SELECT (SELECT count(*) FROM agents_execution WHERE status = 'running'),"
                    " count(*) FILTER (WHERE state = 'active'),"
                    " count(*) FILTER (WHERE wait_event_type = 'Lock'),"
                    " count(*) FILTER (WHERE wait_event IN ('WalSync', 'WalWrite', 'WALWrite',"
                    "   'WALSync'))"
                    " FROM pg_stat_activity WHERE datname = current_database()"
                    " AND pid <> pg_backend_pid()"
                ).fetchone()
                conn.commit()
                assert row is not None
                self.samples.append((int(row[0]), int(row[1]), int(row[2]), int(row[3])))

    def report(self) -> dict[str, float]:
        if not self.samples:
            return {}
        columns = list(zip(*self.samples, strict=True))
        mean = [round(sum(column) / len(column), 1) for column in columns]
        return {
            "sampled_runs_running_mean": mean[0],
            "sampled_runs_running_max": max(columns[0]),
            "sampled_backends_active_mean": mean[1],
            "sampled_backends_waiting_on_a_lock_mean": mean[2],
            "sampled_backends_waiting_on_wal_mean": mean[3],
        }


def in_flight(runs: list[Execution], seconds: float) -> dict[str, float]:
    """Runs in flight from the runs' own start and end times: the mean over the window (the
    sum of their durations over its length, Little's law) and the most at once."""
    edges = sorted(
        [(run.started_at, 1) for run in runs if run.started_at]
        + [(run.completed_at, -1) for run in runs if run.completed_at]
    )
    now = peak = 0
    for _at, step in edges:
        now += step
        peak = max(peak, now)
    busy = sum(
        (run.completed_at - run.started_at).total_seconds()
        for run in runs
        if run.started_at and run.completed_at
    )
    return {"runs_in_flight_mean": round(busy / seconds, 1), "runs_in_flight_max": peak}


def start_runs(agents: list[Any], count: int) -> list[Any]:
    ids = []
    for number in range(count):
        agent = agents[number % len(agents)]
        with tenancy.agency_context(agent.agency_id):
            execution = execution_create(agent=agent, input="Look A up.")
        assert execution is not None
        ids.append(execution.id)
    return ids


def wait_until_done(ids: list[Any], *, after_run: bool = False, timeout: float = 900) -> None:
    """Until every run has ended (``after_run``: and its after-run work is done)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with tenancy.platform_context():
            if after_run:
                left = AfterRunWork.objects.filter(execution_id__in=ids).exists()
            else:
                left = Execution.objects.filter(pk__in=ids).exclude(status__in=TERMINAL).exists()
        if not left:
            return
        time.sleep(0.2)
    raise RuntimeError("the runs did not end in time")


def one_setting(args: argparse.Namespace, server: Any, processes: int) -> dict[str, Any]:
    agents = []
    for _ in range(args.agents):
        agent = common.make_agent(server)
        with tenancy.agency_context(agent.agency_id):
            Contact.objects.create(agency_id=agent.agency_id, first_name="A", email="a@x.io")
        agents.append(agent)
    workers = [
        common.worker(concurrency=args.threads, AGENTDESK_LEASE_SECONDS="120")
        for _ in range(processes)
    ]
    # The embedded Redis's CPU too (a configured one may be on another machine).
    redis = None if os.environ.get("REDIS_URL") else embedded.running_pids()["redis"]
    try:
        for worker in workers:
            worker.start()
        # Unmetered: each worker's first runs load what a process loads once (the tool
        # catalogue, the local embedding model of the after-run work, lazy imports).
        warm_up = start_runs(agents, processes * args.threads // 2)
        wait_until_done(warm_up)
        wait_until_done(warm_up, after_run=True)
        meter = common.CpuMeter(
            workers=[worker.process.pid for worker in workers],
            fake_provider=[server.pid],
            **({"redis": [redis]} if redis else {}),
            bench=[os.getpid()],
        )
        after_meter = common.CpuMeter(**meter.groups)
        sampler = Sampler()
        load_before = os.getloadavg()
        with meter:
            sampler.start()
            ids = start_runs(agents, args.runs)
            wait_until_done(ids)
        sampler.stopping.set()
        # What the runs left to do once ended (episode, embedding, quality, learning): queued
        # as each run ends, most of it after the last one; the same cores pay for it.
        with after_meter:
            wait_until_done(ids, after_run=True)
        sampler.join()
        load_after = os.getloadavg()
    finally:
        for worker in workers:
            worker.stop()
    with tenancy.platform_context():
        runs = list(Execution.objects.filter(pk__in=ids))
        steps = ExecutionStep.objects.filter(execution_id__in=ids, step_number__gt=1).count()
    first = min(run.started_at for run in runs if run.started_at)
    last = max(run.completed_at for run in runs if run.completed_at)
    seconds = (last - first).total_seconds()
    return {
        "worker_processes": processes,
        "threads_per_worker": args.threads,
        "runs": len(runs),
        "completed": sum(1 for run in runs if run.status == "completed"),
        "durable_steps": steps,
        "seconds": round(seconds, 3),
        "durable_steps_per_second": round(steps / seconds, 1),
        **in_flight(runs, seconds),
        **sampler.report(),
        "load_average_1min_before_after": [round(load_before[0], 2), round(load_after[0], 2)],
        **meter.report(steps, "step"),
        "after_run_seconds": round(after_meter.seconds, 3),
        "after_run_cpu_ms_per_step": {
            name: round(used * 1000 / steps, 3) for name, used in after_meter.cpu_seconds().items()
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2,4", help="worker processes of each setting")
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--runs", type=int, default=120)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    settings_order = [int(n) for n in args.workers.split(",")] * args.repeat
    common.create_database()
    facts = common.machine_facts()
    results = []
    try:
        call = tool_call_reply("crm_get_contact", {"email": "a@x.io"})
        responder = by_turn(*([call] * args.iterations), then=text_reply("Done."))
        with common.FakeServerProcess(responder, latency=args.latency) as server:
            for processes in settings_order:
                results.append(one_setting(args, server, processes))
                summary = {key: results[-1][key] for key in SUMMARY if key in results[-1]}
                print(json.dumps(summary), flush=True)
    finally:
        common.drop_database()
    print(facts.describe())
    print(f"cores: {os.cpu_count()}; load average now: {os.getloadavg()}")
    print(json.dumps({"machine": facts.as_dict(), "settings": results}, indent=2))


SUMMARY = (
    "worker_processes",
    "durable_steps_per_second",
    "runs_in_flight_mean",
    "cpu_ms_per_step",
    "after_run_cpu_ms_per_step",
    "cores_busy_fraction",
    "load_average_1min_before_after",
)

if __name__ == "__main__":
    main()
