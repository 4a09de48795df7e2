"""What a runtime costing nothing would reach on the throughput benchmark's workload: durable
fake-model steps per second when every thread does only what no runtime can leave out.

Each thread of each process loops over runs of ``--iterations`` ReAct iterations, as the
throughput benchmark's runs do, with none of the runtime:

- the model call: the real ``openai`` SDK (one client per process) against the fake provider in
  a process of its own, the conversation and the tool's definition sent as a run sends them;
- the reply made durable: one INSERT of the reply, committed, with the agency's tenant settings
  (``tenancy.run_in_one_round_trip``: one round trip, as the runtime writes a reply);
- the tool: the ``crm_get_contact`` handler in the agency's context (row-level security) and the
  INSERT of its result in the same transaction, committed.

No leases, state machine, limits, step bookkeeping, budget, approvals, events, live updates,
Celery or argument validation. The rows go to a table of the benchmark's own. A step is a reply
or a tool result, as in ``bench.throughput``, whose figures this bounds from above: the cores'
CPU per step here, times the steps/s the goal asks for, is what the stack alone needs.

    .venv/bin/python -m bench.floor_throughput [--runs 100 --iterations 10 --workers 2 --threads 16]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import threading
import time
import uuid
from typing import Any

import psycopg
from django.conf import settings
from django.db import connection, connections

from bench import common
from core import tenancy
from tools.handlers import ToolContext
from tools.registry import get_handler

TABLE = "bench_floor_step"
INSERT = f"INSERT INTO {TABLE} (run, number, kind, content) VALUES ($1, $2, $3, $4) RETURNING id"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "crm_get_contact",
            "description": "Look a contact up by e-mail or id.",
            "parameters": {
                "type": "object",
                "properties": {"email": {"type": "string"}, "contact_id": {"type": "string"}},
            },
        },
    }
]


def _create_table() -> None:
    runtime_role = settings.DATABASES["default"]["USER"]
    with psycopg.connect(common.database_conninfo("owner"), autocommit=True) as owner:
        owner.execute(
            f"CREATE TABLE {TABLE} (id bigserial PRIMARY KEY, run uuid NOT NULL, "
            "number int NOT NULL, kind text NOT NULL, content jsonb NOT NULL, "
            "created_at timestamptz NOT NULL DEFAULT now())"
        )
        owner.execute(f'GRANT SELECT, INSERT ON {TABLE} TO "{runtime_role}"')
        owner.execute(f'GRANT USAGE ON SEQUENCE {TABLE}_id_seq TO "{runtime_role}"')


def _one_run(client: Any, agent: Any, handler: Any, iterations: int) -> None:
    run = uuid.uuid4()
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You look contacts up."},
        {"role": "user", "content": "Look Ada up, again and again."},
    ]
    number = 0
    while True:
        completion = client.chat.completions.create(
            model=agent.llm_model, messages=messages, tools=TOOLS
        )
        message = completion.choices[0].message
        number += 1
        calls = message.tool_calls or []
        reply = {
            "content": message.content,
            "tool_calls": [
                {"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
                for c in calls
            ],
        }
        tenancy.run_in_one_round_trip(
            agent.agency_id, INSERT, [run, number, "think", json.dumps(reply)]
        )
        if not calls:
            return
        messages.append(
            {
                "role": "assistant",
                "content": message.content,
                "tool_calls": [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.function.name, "arguments": c.function.arguments},
                    }
                    for c in calls
                ],
            }
        )
        for call in calls:
            number += 1
            with tenancy.agency_context(agent.agency_id):
                context = ToolContext(
                    agency_id=agent.agency_id, site_id=agent.site_id, agent_id=agent.id,
                    execution_id=run, tool_call_id=call.id, idempotency_key=f"{run}:{call.id}",
                )  # fmt: skip
                result = json.dumps(handler(context, json.loads(call.function.arguments)))
                with psycopg.RawCursor(connection.connection) as cursor:
                    cursor.execute(INSERT, [run, number, "act", result])
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})


def _worker(
    agent: Any,
    base_url: str,
    runs: int,
    *,
    threads: int,
    iterations: int,
    cpu: Any = None,
    done: Any = None,
    release: Any = None,
) -> None:
    """A worker process: ``threads`` threads share ``runs`` runs (forked: fresh connections).
    Its CPU seconds go to ``cpu`` when it is done; it then keeps its pooled connections until
    ``release``, so that the parent can read their server processes' CPU."""
    import openai  # noqa: PLC0415

    connections.close_all()
    client = openai.OpenAI(base_url=base_url, api_key="bench-key-not-real", max_retries=0)
    handler = get_handler("crm_get_contact")
    left = [runs]
    lock = threading.Lock()

    def loop() -> None:
        while True:
            with lock:
                if left[0] == 0:
                    break
                left[0] -= 1
            _one_run(client, agent, handler, iterations)
        connection.close()

    pool = [threading.Thread(target=loop) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    if cpu is not None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        with cpu.get_lock():
            cpu.value += usage.ru_utime + usage.ru_stime
    if done is not None:
        done.set()
        release.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=16)
    args = parser.parse_args()
    common.create_database()
    try:
        facts = common.machine_facts()
        _create_table()
        with common.FakeServerProcess(common.iterations_script) as server:
            agent = common.looping_agent(server, args.iterations)
            # Warm the imports the children inherit (fork): the SDK, the handler's modules.
            _worker(agent, server.openai_base_url, 2, threads=1, iterations=1)
            with psycopg.connect(common.database_conninfo("owner"), autocommit=True) as owner:
                owner.execute(f"TRUNCATE {TABLE}")
            # The children must open pools of their own: a forked pool has no worker threads.
            for alias in connections:
                connections[alias].close_pool()  # type: ignore[attr-defined]  # PostgreSQL's
            context = multiprocessing.get_context("fork")
            share = [args.runs // args.workers + (i < args.runs % args.workers) for i in
                     range(args.workers)]  # fmt: skip
            worker_cpu = context.Value("d", 0.0)
            release = context.Event()
            done = [context.Event() for _ in share]
            processes = [
                context.Process(
                    target=_worker,
                    args=(agent, server.openai_base_url, n),
                    kwargs={
                        "threads": args.threads,
                        "iterations": args.iterations,
                        "cpu": worker_cpu,
                        "done": finished,
                        "release": release,
                    },
                )
                for n, finished in zip(share, done, strict=True)
            ]
            meter = common.CpuMeter(fake_provider=[server.pid])
            with meter:
                started = time.perf_counter()
                for process in processes:
                    process.start()
                for finished in done:
                    finished.wait()
                seconds = time.perf_counter() - started
            release.set()
            for process in processes:
                process.join()
            with connection.cursor() as cursor:
                cursor.execute(f"SELECT count(*) FROM {TABLE}")
                steps = cursor.fetchone()[0]
    finally:
        connections.close_all()
        common.drop_database()
    expected = args.runs * (2 * args.iterations + 1)
    report = {
        "machine": facts.as_dict(),
        "runs": args.runs,
        "iterations_per_run": args.iterations,
        "worker_processes": args.workers,
        "threads_per_worker": args.threads,
        "durable_steps": steps,
        "expected_steps": expected,
        "seconds": round(seconds, 3),
        "durable_steps_per_second": round(steps / seconds, 1),
        **meter.report(steps, "step", measured_elsewhere={"workers": worker_cpu.value}),
    }
    print(facts.describe())
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
