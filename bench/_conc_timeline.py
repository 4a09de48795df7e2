"""Many runs in flight on one worker process: 200 executions whose model calls each take 1 s
(one tool call, then a final answer: two model calls per run) on a single Celery worker
process with a thread pool.

Goals (issue 4): >= 200 in flight at once per worker process, all done in under 5 s, worker
memory under 500 MB; waiting executions hold no worker slot.

    .venv/bin/python -m bench.concurrency [--runs 200] [--latency 1.0] [--threads 256]
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from typing import Any

import psutil

from agents.llm.fake_server import FakeProviderServer
from agents.llm.fake_server.script import react_responder
from agents.models import Execution
from agents.services import execution_create
from bench import common
from core import tenancy
from crm.models import Contact

TERMINAL = ("completed", "failed", "cancelled", "timed_out")


def _sample_memory(pid: int, stop: threading.Event, peak: list[int]) -> None:
    process = psutil.Process(pid)
    while not stop.wait(0.05):
        try:
            peak[0] = max(peak[0], process.memory_info().rss)
        except psutil.NoSuchProcess:
            return


def _launch(agent: Any, runs: int) -> list[Any]:
    """Create ``runs`` executions in one transaction: their tasks go out when it commits."""
    ids = []
    with tenancy.agency_context(agent.agency_id):
        for _ in range(runs):
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=256)
    args = parser.parse_args()
    common.create_database()
    facts = common.machine_facts()
    worker = common.worker(concurrency=args.threads, AGENTDESK_LEASE_SECONDS="120").start()
    assert worker.process is not None
    try:
        with FakeProviderServer(latency=args.latency, record=False) as server:
            agent = common.make_agent(server)
            with tenancy.agency_context(agent.agency_id):
                Contact.objects.create(agency_id=agent.agency_id, first_name="A", email="a@x.io")
            server.set_responder(
                react_responder("crm_get_contact", {"email": "a@x.io"}), key=agent.llm_model
            )
            # Warm-up: a long-lived worker has imported the SDK, compiled its regexes and
            # statements and opened its connections before the measured batch arrives.
            _wait(agent, _launch(agent, 10))
            server.max_in_flight = 0
            idle_rss = psutil.Process(worker.process.pid).memory_info().rss
            peak = [idle_rss]
            stop = threading.Event()
            sampler = threading.Thread(
                target=_sample_memory, args=(worker.process.pid, stop, peak), daemon=True
            )
            sampler.start()
            started = time.perf_counter()
            ids = _launch(agent, args.runs)
            enqueued = time.perf_counter() - started
            _wait(agent, ids)
            elapsed = time.perf_counter() - started
            stop.set()
            with tenancy.agency_context(agent.agency_id):
                completed = Execution.objects.filter(pk__in=ids, status="completed").count()
                from agents.models import ExecutionStep
                rows = list(Execution.objects.filter(pk__in=ids).values("id","created_at","started_at","completed_at"))
                t0 = min(r["created_at"] for r in rows)
                steps = {}
                for st in ExecutionStep.objects.filter(execution_id__in=ids).values("execution_id","step_number","completed_at","llm_response"):
                    steps.setdefault(st["execution_id"], {})[st["step_number"]] = st
                def rel(x): return (x - t0).total_seconds()
                cols = {"created": [], "claimed": [], "s1": [], "s2": [], "s3": [], "s4": [], "done": [], "lat2": [], "lat4": []}
                for r in rows:
                    cols["created"].append(rel(r["created_at"])); cols["claimed"].append(rel(r["started_at"])); cols["done"].append(rel(r["completed_at"]))
                    ss = steps[r["id"]]
                    for n in (1,2,3,4):
                        cols[f"s{n}"].append(rel(ss[n]["completed_at"]))
                    cols["lat2"].append(ss[2]["llm_response"]["latency_ms"]/1000); cols["lat4"].append(ss[4]["llm_response"]["latency_ms"]/1000)
                for k, v in cols.items():
                    v.sort(); print(f"{k:8s} min {v[0]:.2f} p10 {v[20]:.2f} p50 {v[100]:.2f} p90 {v[180]:.2f} max {v[-1]:.2f}")
            max_in_flight = server.max_in_flight
    finally:
        worker.stop()
        common.drop_database()
    report = {
        "machine": facts.as_dict(),
        "runs": args.runs,
        "model_latency_s": args.latency,
        "model_calls_per_run": 2,
        "worker_threads": args.threads,
        "completed": completed,
        "all_done_s": round(elapsed, 3),
        "enqueue_s": round(enqueued, 3),
        "ideal_s": 2 * args.latency,
        "max_model_calls_in_flight": max_in_flight,
        "worker_rss_idle_mb": round(idle_rss / 2**20, 1),
        "worker_rss_peak_mb": round(peak[0] / 2**20, 1),
    }
    print(facts.describe())
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
