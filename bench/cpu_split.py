"""Where the CPU of a durable step goes: one run of the ReAct loop on one thread of this process
(no worker pool, no contention), zero-latency fake model in a process of its own, everything
persisted and broadcast as in production. Thread-CPU timers around the parts:

- model call: our provider layer and the ``openai`` SDK with its HTTP stack (client side);
- tool handler: ``crm_get_contact`` with its two ORM queries (the same tool as the other benches);
- writes: the runtime's step writes on the client (statement building, psycopg, the kernel);
- runtime: everything else the run's thread does (loop, executor, rows, context, bookkeeping);
- other threads of this process (the live-update publisher), PostgreSQL (all its processes) and
  the fake provider, from the kernel's counters.

The "floor" is what a runtime costing nothing would still spend per step here (model call + tool
handler + PostgreSQL), and the throughput that floor allows with every core busy: it bounds the
throughput goal on this machine whatever the runtime does.

    .venv/bin/python -m bench.cpu_split [--iterations 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from agents.llm import base as llm_base
from agents.runtime import loop, store
from agents.runtime.loop import run_execution
from agents.runtime.store import deferred_commit
from bench import common
from core import fastdb, realtime
from tools import handler_call

# The parts timed on the run's thread: (owner, attribute, part). A part's time excludes the
# parts timed inside it: the model call runs the runtime's before-send hook (loop._Run.
# _before_request: collecting the last tool result's commit, a write, then the runtime's own
# checks), which is not the model call's CPU.
PARTS = (
    (llm_base.Provider, "complete", "model_call"),
    (loop._Run, "_before_request", "runtime_in_model_call"),
    (handler_call, "run_handler", "tool_handler"),
    (store.StepTransaction, "save", "writes"),
    (fastdb, "send_with_commit", "writes"),
    (deferred_commit.CommitInFlight, "settle", "writes"),
)
REPORTED = ("model_call", "tool_handler", "writes")


@contextmanager
def _thread_cpu_timers(totals: dict[str, float]) -> Iterator[None]:
    """Add each part's thread-CPU seconds (without its timed inner parts) to ``totals``."""
    originals: list[tuple[Any, str, Callable[..., Any]]] = []
    inner: list[float] = []  # per active part: the CPU its timed inner parts took so far
    for owner, name, part in PARTS:
        original = getattr(owner, name)

        def timed(*args: Any, __original: Any = original, __part: str = part, **kwargs: Any) -> Any:
            started = time.thread_time()
            inner.append(0.0)
            try:
                return __original(*args, **kwargs)
            finally:
                spent = time.thread_time() - started
                totals[__part] += spent - inner.pop()
                if inner:
                    inner[-1] += spent

        originals.append((owner, name, original))
        setattr(owner, name, functools.wraps(original)(timed))
    try:
        yield
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)


def run_once(server: Any, iterations: int) -> dict[str, float]:
    """CPU milliseconds per ReAct iteration, by part, of one run of ``iterations``."""
    execution = common.pending_execution(common.looping_agent(server, iterations))
    totals: dict[str, float] = defaultdict(float)
    meter = common.CpuMeter(fake_provider=[server.pid], this_process=[os.getpid()])
    with meter, _thread_cpu_timers(totals):
        thread_started = time.thread_time()
        assert run_execution(execution.id, agency_id=execution.agency_id) == "completed"
        thread_total = time.thread_time() - thread_started
        realtime.flush()
    used = meter.cpu_seconds()
    parts = {part: totals[part] for part in REPORTED}
    seconds = {
        **parts,
        "runtime": thread_total - sum(parts.values()),
        "other_threads": used["this_process"] - thread_total,
        "postgresql": used["postgresql"],
        "fake_provider": used["fake_provider"],
    }
    return {name: value * 1000 / (iterations + 1) for name, value in seconds.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    common.create_database()
    try:
        facts = common.machine_facts()
        with common.FakeServerProcess(common.iterations_script) as server:
            run_once(server, 3)  # warm-up: imports, prepared statements, connections
            runs = [run_once(server, args.iterations) for _ in range(args.repeat)]
    finally:
        common.drop_database()
    per_iteration = {name: statistics.median(run[name] for run in runs) for name in runs[0]}
    # An iteration is two durable steps (the model's reply, the tool's result).
    per_step = {name: round(value / 2, 3) for name, value in per_iteration.items()}
    floor = per_step["model_call"] + per_step["tool_handler"] + per_step["postgresql"]
    cores = os.cpu_count() or 1
    report = {
        "machine": facts.as_dict(),
        "iterations": args.iterations,
        "runs": args.repeat,
        "cpu_ms_per_iteration": {k: round(v, 3) for k, v in per_iteration.items()},
        "cpu_ms_per_step": {**per_step, "total": round(sum(per_step.values()), 3)},
        "floor_ms_per_step_model_call_tool_handler_postgresql": round(floor, 3),
        "cores": cores,
        "floor_allows_steps_per_second": round(cores * 1000 / floor, 1),
    }
    print(facts.describe())
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
