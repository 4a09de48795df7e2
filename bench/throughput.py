"""Durable steps per second across many concurrent executions on this machine, zero-latency
model: every step (model reply or tool result) committed, broadcast and fenced as in production.

Goal (issue 4): >= 1,000 durable steps/s on one 2-core machine.

    .venv/bin/python -m bench.throughput [--runs 100] [--iterations 10] [--workers 2] [--threads 16]
"""

from __future__ import annotations

import argparse
import json
import os
import time

from agents.models import Execution, ExecutionStep
from agents.services import execution_create
from bench import common
from core import tenancy
from crm.models import Contact
from devkit.fake_server.script import by_turn, text_reply, tool_call_reply

TERMINAL = ("completed", "failed", "cancelled", "timed_out")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=16)
    args = parser.parse_args()
    common.create_database()
    facts = common.machine_facts()
    workers = [
        common.worker(concurrency=args.threads, AGENTDESK_LEASE_SECONDS="120")
        for _ in range(args.workers)
    ]
    try:
        for worker in workers:
            worker.start()
        call = tool_call_reply("crm_get_contact", {"email": "a@x.io"})
        responder = by_turn(*([call] * args.iterations), then=text_reply("Done."))
        # The fake provider in a process of its own: its CPU is not the benchmark's to measure.
        with common.FakeServerProcess(responder) as server:
            agent = common.make_agent(server)
            with tenancy.agency_context(agent.agency_id):
                Contact.objects.create(agency_id=agent.agency_id, first_name="A", email="a@x.io")
            ids = []
            meter = common.CpuMeter(
                workers=[worker.process.pid for worker in workers],
                fake_provider=[server.pid],
                bench=[os.getpid()],
            )
            with meter:
                with tenancy.agency_context(agent.agency_id):
                    for _ in range(args.runs):
                        execution = execution_create(agent=agent, input="Look A up.")
                        assert execution is not None
                        ids.append(execution.id)
                deadline = time.monotonic() + 600
                while time.monotonic() < deadline:
                    with tenancy.agency_context(agent.agency_id):
                        done = Execution.objects.filter(pk__in=ids, status__in=TERMINAL).count()
                    if done == len(ids):
                        break
                    time.sleep(0.2)
            with tenancy.agency_context(agent.agency_id):
                runs = Execution.objects.filter(pk__in=ids)
                completed = runs.filter(status="completed").count()
                first = min(r.started_at for r in runs if r.started_at)
                last = max(r.completed_at for r in runs if r.completed_at)
                steps = ExecutionStep.objects.filter(
                    execution_id__in=ids, step_number__gt=1
                ).count()
    finally:
        for worker in workers:
            worker.stop()
        common.drop_database()
    seconds = (last - first).total_seconds()
    report = {
        "machine": facts.as_dict(),
        "runs": args.runs,
        "completed": completed,
        "worker_processes": args.workers,
        "threads_per_worker": args.threads,
        "durable_steps": steps,
        "seconds": round(seconds, 3),
        "durable_steps_per_second": round(steps / seconds, 1),
        # Where the cores went, from the first run's creation until the last one ended (the
        # polling above adds up to 0.2 s of idle time at the end).
        **meter.report(steps, "step"),
    }
    print(facts.describe())
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
