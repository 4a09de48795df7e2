"""Many runs in flight on one worker process: 200 executions whose model calls each take 1 s
(one tool call, then a final answer: two model calls per run) on a single Celery worker
process with a thread pool.

Goals (issue 4): >= 200 in flight at once per worker process, all done in under 5 s, worker
memory under 500 MB; waiting executions hold no worker slot.

    .venv/bin/python -m bench.concurrency [--runs 200] [--latency 1.0] [--threads 256] [--workers 1]
                                          [--repeat 3] [--capacity-latency 4.0]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import threading
import time
from typing import Any

import psutil

from agents.models import Execution
from agents.services import execution_create
from bench import common
from core import tenancy
from crm.models import Contact
from devkit.fake_server.script import react_responder

TERMINAL = ("completed", "failed", "cancelled", "timed_out")


def _sample_memory(pids: list[int], stop: threading.Event, peak: list[int]) -> None:
    """``peak``: [largest process, all worker processes together] (RSS bytes)."""
    processes = [psutil.Process(pid) for pid in pids]
    while not stop.wait(0.05):
        try:
            sizes = [process.memory_info().rss for process in processes]
        except psutil.NoSuchProcess:
            return
        peak[0], peak[1] = max(peak[0], *sizes), max(peak[1], sum(sizes))


def _launch(agent: Any, runs: int, *, at_once: bool = False) -> list[Any]:
    """Create ``runs`` executions, each committed (its task sent) on its own as separate API
    calls would be; ``at_once``: all in one transaction, their tasks sent together at commit."""
    ids = []
    with tenancy.agency_context(agent.agency_id) if at_once else contextlib.nullcontext():
        for _ in range(runs):
            with tenancy.agency_context(agent.agency_id):
                execution = execution_create(agent=agent, input="Look A up.")
            assert execution is not None
            ids.append(execution.id)
    return ids


def _wait(agent: Any, ids: list[Any], timeout: float = 120) -> None:
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        with tenancy.agency_context(agent.agency_id):
            if Execution.objects.filter(pk__in=ids, status__in=TERMINAL).count() == len(ids):
                return
        time.sleep(0.02)


def _batch(agent: Any, runs: int, worker_pids: list[int], server_pid: int) -> dict[str, Any]:
    """One measured batch: wall time from the first run's creation to the last one's end, the
    time creating them took, how many completed, and the CPU per run of every process group."""
    meter = common.CpuMeter(workers=worker_pids, fake_provider=[server_pid], bench=[os.getpid()])
    with meter:
        started = time.perf_counter()
        ids = _launch(agent, runs)  # counted: creating them is part of the work
        enqueued = time.perf_counter() - started
        _wait(agent, ids)
        seconds = time.perf_counter() - started
    with tenancy.agency_context(agent.agency_id):
        completed = Execution.objects.filter(pk__in=ids, status="completed").count()
    cpu = meter.report(runs, "run")["cpu_ms_per_run"]
    return {"seconds": seconds, "enqueued": enqueued, "completed": completed, "cpu": cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=256)
    parser.add_argument("--workers", type=int, default=1, help="worker processes")
    parser.add_argument("--capacity-latency", type=float, default=4.0)
    parser.add_argument("--repeat", type=int, default=3, help="measured batches")
    args = parser.parse_args()
    common.create_database()
    facts = common.machine_facts()
    workers = [
        common.worker(concurrency=args.threads, AGENTDESK_LEASE_SECONDS="120").start()
        for _ in range(args.workers)
    ]
    pids = [w.process.pid for w in workers if w.process is not None]
    try:
        responder = react_responder("crm_get_contact", {"email": "a@x.io"})
        with common.FakeServerProcess(responder, latency=args.latency) as server:
            agent = common.make_agent(server)
            with tenancy.agency_context(agent.agency_id):
                Contact.objects.create(agency_id=agent.agency_id, first_name="A", email="a@x.io")
            # Warm-up: a long-lived worker has imported the SDK, compiled its regexes and
            # statements and opened its connections before the measured batch arrives.
            _wait(agent, _launch(agent, 10))
            server.reset_max_in_flight()
            idle_rss = max(psutil.Process(pid).memory_info().rss for pid in pids)
            peak = [idle_rss, 0]
            stop = threading.Event()
            threading.Thread(target=_sample_memory, args=(pids, stop, peak), daemon=True).start()
            # Several batches, the machine's noise being what it is; the median is the figure.
            batches = [_batch(agent, args.runs, pids, server.pid) for _ in range(args.repeat)]
            stop.set()
            max_in_flight = server.max_in_flight
        # Capacity: the same runs started at once with model calls long enough to outlast
        # everyone's start: how many one worker process keeps in flight together.
        with common.FakeServerProcess(responder, latency=args.capacity_latency) as slow:
            slow_agent = common.make_agent(slow)
            with tenancy.agency_context(slow_agent.agency_id):
                Contact.objects.create(
                    agency_id=slow_agent.agency_id, first_name="A", email="a@x.io"
                )
            _wait(slow_agent, _launch(slow_agent, args.runs, at_once=True))
            capacity_in_flight = slow.max_in_flight
    finally:
        for worker in workers:
            worker.stop()
        common.drop_database()
    report = {
        "machine": facts.as_dict(),
        "runs": args.runs,
        "model_latency_s": args.latency,
        "model_calls_per_run": 2,
        "worker_processes": args.workers,
        "threads_per_worker": args.threads,
        "completed": sum(b["completed"] for b in batches),  # of runs x repeat
        # From the first run's creation to the last one's end, per batch; the median.
        "all_done_s": round(statistics.median(b["seconds"] for b in batches), 3),
        "all_done_s_per_batch": [round(b["seconds"], 3) for b in batches],
        "creating_the_runs_s": round(batches[-1]["enqueued"], 3),
        "capacity_model_latency_s": args.capacity_latency,
        "capacity_max_model_calls_in_flight": capacity_in_flight,
        "ideal_s": 2 * args.latency,
        "max_model_calls_in_flight": max_in_flight,
        "worker_rss_idle_mb": round(idle_rss / 2**20, 1),  # the largest process
        "worker_rss_peak_mb": round(peak[0] / 2**20, 1),
        "workers_rss_peak_total_mb": round(peak[1] / 2**20, 1),  # all worker processes
        # Where the cores went during a batch (median of the batches), per run: the workers'
        # CPU per run times the runs is what one worker process's GIL has to get through.
        "cpu_ms_per_run": {
            name: round(statistics.median(b["cpu"][name] for b in batches), 2)
            for name in batches[0]["cpu"]
        },
    }
    print(facts.describe())
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
