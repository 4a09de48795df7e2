"""Per-step overhead of the runtime, through a real Celery worker, with a zero-latency model.

One execution of 100 ReAct iterations (think -> crm_get_contact -> think ...) then a final
answer, everything persisted and broadcast. For each committed step:

    overhead = time from the previous step's commit to this step's, minus the model call
               (think steps) or minus the tool handler's own work (act steps)

reported as p50/p99, above the machine's one round trip + one durable commit measured in the
same run. Also: commits per step (pg_stat_database) and bytes per step (the step rows' sizes,
first 20 steps vs last 20, and WAL bytes per step for a short and a long run).

    .venv/bin/python -m bench.step_overhead [--iterations 100]

With ``--metrics both`` (issue 16: "the step overhead benchmark re-run with metrics on: within
5 % of off"), alternating workers with Prometheus metrics off and on (``AGENTDESK_METRICS``),
``--repeat`` times each: per run the overhead p50/p99 and the worker's CPU per step, then the
medians of each setting and on/off ratios. ``--metrics on|off`` runs one setting as above.
``--metrics cost`` times, in this process, the recording calls one ReAct iteration makes (a
think and an act step, with tracing off as by default) and those of a run's start and end, with
metrics on and off. ``--decision-points both`` (issue 19: decision points move the step
overhead by at most 5 %) alternates workers with flow's decision points off and on
(``AGENTDESK_FLOW_DECISION_POINTS``) in the same way, with each run's WAL bytes per step and
the machine's load average.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import psutil

from agents.llm.types import Usage
from agents.models import Execution, StepType
from agents.services import execution_create
from bench import common
from core import realtime, tenancy
from crm.models import Contact
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import by_turn, text_reply, tool_call_reply
from tests.processes import wait_for
from tools.models import ToolCall


def run_once(
    server: FakeProviderServer, iterations: int, *, worker_pid: int | None = None
) -> dict[str, Any]:
    agent = common.make_agent(server)
    with tenancy.agency_context(agent.agency_id):
        Contact.objects.create(agency_id=agent.agency_id, first_name="Ada", email="ada@x.io")
    call = tool_call_reply("crm_get_contact", {"email": "ada@x.io"})
    server.set_responder(
        by_turn(*([call] * iterations), then=text_reply("Done.")), key=agent.llm_model
    )
    before = common.database_counters()
    cpu_before = _cpu_seconds(worker_pid)
    with tenancy.agency_context(agent.agency_id):
        execution = execution_create(agent=agent, input="Look Ada up, again and again.")
    assert execution is not None
    execution = wait_for(execution, timeout=600)
    worker_cpu = _cpu_seconds(worker_pid) - cpu_before
    realtime.flush()
    time.sleep(0.5)  # let the event dispatch task of the run commit too
    after = common.database_counters()
    assert execution.status == "completed", execution.error
    with tenancy.agency_context(agent.agency_id):
        steps = list(
            Execution.objects.get(pk=execution.pk)
            .steps.order_by("step_number")
            .values("step_number", "step_type", "completed_at", "llm_response", "id")
        )
        sizes = _row_sizes([s["id"] for s in steps])
        tool_ms = {
            step_id: common.elapsed_ms(started, completed)
            for step_id, started, completed in ToolCall.objects.filter(
                execution_id=execution.id
            ).values_list("step_id", "started_at", "completed_at")
        }
        writers = common.writing_transactions(execution.id)
    overheads: list[float] = []
    model_ms: list[float] = []
    handler_ms: list[float] = []
    for previous, step in itertools.pairwise(steps):
        gap = (step["completed_at"] - previous["completed_at"]).total_seconds() * 1000  # type: ignore[operator]
        latency = 0.0
        if step["step_type"] == StepType.THINK:
            latency = float(step["llm_response"]["latency_ms"])  # type: ignore[index]
            model_ms.append(latency)
        elif step["id"] in tool_ms:
            latency = float(tool_ms[step["id"]] or 0)
            handler_ms.append(latency)
        overheads.append(gap - latency)
    committed = len(steps) - 1  # the first (observe) step commits with the claim
    return {
        "steps": committed,
        "overhead_ms": overheads,
        "model_call_ms": model_ms,
        "tool_ms": handler_ms,
        "commits": after["commits"] - before["commits"],
        "writing_transactions": writers,
        "wal_bytes": after["wal_bytes"] - before["wal_bytes"],
        "row_bytes_first20": sum(sizes[1:21]) / 20,
        "row_bytes_last20": sum(sizes[-20:]) / 20,
        "worker_cpu_ms_per_step": worker_cpu * 1000 / committed,
    }


def _cpu_seconds(pid: int | None) -> float:
    """User + system CPU of the worker process so far (0 when not measured)."""
    if pid is None:
        return 0.0
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


# The settings ``--metrics both`` and ``--decision-points both`` switch, and their variables.
SWITCHES = {"metrics": "AGENTDESK_METRICS", "decision_points": "AGENTDESK_FLOW_DECISION_POINTS"}


def _one_setting(
    server: FakeProviderServer, iterations: int, switch: str, setting: str
) -> dict[str, Any]:
    """A fresh worker with ``switch`` (metrics, decision points) ``on`` or ``off``: warm-up,
    then one measured run."""
    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as directory:
        worker = common.worker(
            concurrency=4,
            **{SWITCHES[switch]: "true" if setting == "on" else "false"},
            PROMETHEUS_MULTIPROC_DIR=directory,
        ).start()
        try:
            run_once(server, 3)  # warm-up: imports, connections, caches
            load = os.getloadavg()[0]
            result = run_once(server, iterations, worker_pid=worker.process.pid)
        finally:
            worker.stop()
    p50 = common.percentile(result["overhead_ms"], 50)
    p99 = common.percentile(result["overhead_ms"], 99)
    return {
        switch: setting,
        "overhead_p50_ms": round(p50, 3),
        "overhead_p99_ms": round(p99, 3),
        "worker_cpu_ms_per_step": round(result["worker_cpu_ms_per_step"], 3),
        "wal_bytes_per_step": round(result["wal_bytes"] / result["steps"]),
        # The machine is shared: how busy it was (1-minute load average, start and end).
        "load_average": [round(load, 2), round(os.getloadavg()[0], 2)],
    }


def metrics_cost(iterations: int, rounds: int = 20_000) -> None:
    """Microseconds the metrics add to a step and to a run, measured on the recording calls
    themselves (the runtime makes exactly these): no database, no noise from other processes."""
    from ops import tracing  # noqa: PLC0415
    from ops.metrics import recording  # noqa: PLC0415

    completion: Any = SimpleNamespace(
        latency_ms=3.2, usage=Usage(input_tokens=900, output_tokens=40, cache_read_tokens=0)
    )
    agent: Any = SimpleNamespace(pk=uuid.uuid4(), agent_type="assistant")
    execution: Any = SimpleNamespace(
        agent_id=agent.pk, status="completed", stop_reason="final_answer", duration_ms=1234
    )
    cost = Decimal("0.000123")

    def iteration() -> None:  # what _think and _act record for one think + one act step
        with tracing.model_call(provider="openai", model="m", max_tokens=1, temperature=0) as s:
            tracing.model_replied(s, completion)  # (tracing off: as the runtime calls it)
        meter.model_replied(completion, cost)
        meter.think_step(0.0021)
        with tracing.tool_call(name="crm_get_contact", call_id="c1") as s:
            recording.tool_call_settled(tool="crm_get_contact", outcome="completed", error=None)
            tracing.tool_settled(s, status="completed", output={})
        meter.act_step(0.0013)

    def run() -> None:  # once per run: start, the delivery gauge, the end
        recording.run_started(agent, trigger="manual")
        with recording.delivery_in_progress():
            pass
        recording.run_finished(execution)

    report: dict[str, Any] = {"rounds": rounds}
    for setting in ("off", "on"):
        recording.ENABLED = setting == "on"
        meter = recording.RunMeter(agent=agent, provider="openai", model="bench-cost")
        per_step = _best_of(iteration, rounds) / 2
        per_run = _best_of(run, rounds // 10)
        report[setting] = {
            "us_per_step": round(per_step * 1e6, 2),
            "us_per_run": round(per_run * 1e6, 2),
            # Spread over a run of this benchmark's length (2 x iterations + 1 steps).
            "us_per_step_incl_run_share": round(
                (per_step + per_run / (2 * iterations + 1)) * 1e6, 2
            ),
        }
    recording.ENABLED = True
    print(json.dumps(report, indent=2))


def _best_of(work: Callable[[], None], rounds: int, repeat: int = 5) -> float:
    """Seconds per call, the best of ``repeat`` timings (the least disturbed by the machine)."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        for _ in range(rounds):
            work()
        best = min(best, (time.perf_counter() - started) / rounds)
    return best


def compare(iterations: int, repeat: int, switch: str) -> None:
    """``switch`` (metrics, decision points) off and on, alternated ``repeat`` times (off
    first), each on a fresh worker."""
    common.create_database()
    facts = common.machine_facts()
    runs: list[dict[str, Any]] = []
    try:
        with FakeProviderServer() as server:
            for _ in range(repeat):
                for setting in ("off", "on"):
                    runs.append(_one_setting(server, iterations, switch, setting))
                    print(json.dumps(runs[-1]))
    finally:
        common.drop_database()
    summary: dict[str, Any] = {"machine": facts.as_dict(), "iterations": iterations, "runs": runs}
    for key in ("overhead_p50_ms", "overhead_p99_ms", "worker_cpu_ms_per_step"):
        medians = {
            setting: statistics.median(r[key] for r in runs if r[switch] == setting)
            for setting in ("off", "on")
        }
        pairs = [on[key] / off[key] for off, on in itertools.batched(runs, 2) if off[key]]
        summary[key] = {
            **{k: round(v, 3) for k, v in medians.items()},
            "on_over_off": round(medians["on"] / medians["off"], 3),
            # Each pair ran back to back: the least disturbed by what else the machine did.
            "median_of_pairs_on_over_off": round(statistics.median(pairs), 3),
        }
    print(facts.describe())
    print(json.dumps(summary, indent=2))


def alternate_replies(iterations: int, repeat: int) -> None:
    """Decision points recorded on every other model reply of the same run, ``repeat`` runs of
    ``iterations`` on one thread of this process (as bench.cpu_split: no worker, the model in a
    process of its own): the step overhead (as above) of the iterations whose reply recorded
    them against the others'. Whatever else the machine does hits both halves alike, which
    alternating whole runs (``--decision-points both``) cannot promise on a busy machine."""
    from django.conf import settings  # noqa: PLC0415

    from agents.runtime.loop import run_execution  # noqa: PLC0415
    from flow.runtime import RunFlow  # noqa: PLC0415

    settings.AGENTDESK_FLOW_DECISION_POINTS = True
    recorded: set[uuid.UUID] = set()  # the think steps whose reply recorded decision points
    replies = {"count": 0}
    replied = RunFlow.replied

    def every_other(flow: RunFlow, tx: Any, completion: Any, *, step_id: uuid.UUID) -> None:
        replies["count"] += 1
        flow.record = replies["count"] % 2 == 0
        if flow.record:
            recorded.add(step_id)
        replied(flow, tx, completion, step_id=step_id)

    RunFlow.replied = every_other  # type: ignore[assignment,method-assign]
    common.create_database()
    facts = common.machine_facts()
    runs: list[dict[str, Any]] = []
    try:
        with common.FakeServerProcess(common.iterations_script) as server:
            warm_up = common.pending_execution(common.looping_agent(server, 3))
            run_execution(warm_up.id, agency_id=warm_up.agency_id)
            for n in range(repeat):
                replies["count"] = n % 2  # which half goes first alternates
                recorded.clear()
                execution = common.pending_execution(common.looping_agent(server, iterations))
                load = os.getloadavg()[0]
                assert run_execution(execution.id, agency_id=execution.agency_id) == "completed"
                runs.append(_by_half(execution, recorded, [load, os.getloadavg()[0]]))
                print(json.dumps(runs[-1]))
    finally:
        RunFlow.replied = replied  # type: ignore[method-assign]
        common.drop_database()
    summary: dict[str, Any] = {"machine": facts.as_dict(), "iterations": iterations, "runs": runs}
    for key in ("overhead_p50_ms", "iteration_overhead_p50_ms"):
        off = statistics.median(r[key]["off"] for r in runs)
        on = statistics.median(r[key]["on"] for r in runs)
        summary[key] = {
            "off": round(off, 3),
            "on": round(on, 3),
            "on_over_off": round(on / off, 3),
            "median_of_runs_on_over_off": round(
                statistics.median(r[key]["on"] / r[key]["off"] for r in runs), 3
            ),
        }
    print(facts.describe())
    print(json.dumps(summary, indent=2))


def _by_half(execution: Execution, recorded: set[uuid.UUID], load: list[float]) -> dict[str, Any]:
    """A run's step overheads by whether the iteration's reply recorded decision points: the
    p50 of its steps (think and act) and of its iterations (the two together; a reply's write
    counts in the next step's overhead, as a step's completion time is taken before it)."""
    with tenancy.agency_context(execution.agency_id):
        steps = list(
            execution.steps.order_by("step_number").values(
                "id", "step_type", "completed_at", "llm_response"
            )
        )
        tool_ms = {
            step_id: common.elapsed_ms(started, completed)
            for step_id, started, completed in ToolCall.objects.filter(
                execution_id=execution.id
            ).values_list("step_id", "started_at", "completed_at")
        }
    steps_of: dict[str, list[float]] = {"off": [], "on": []}
    iterations_of: dict[str, list[float]] = {"off": [], "on": []}
    half = None
    for previous, step in itertools.pairwise(steps[:-1]):  # (not the final answer)
        elapsed = step["completed_at"] - previous["completed_at"]  # type: ignore[operator]
        gap = float(elapsed.total_seconds() * 1000)
        if step["step_type"] == StepType.THINK:
            half = "on" if step["id"] in recorded else "off"
            gap -= float(step["llm_response"]["latency_ms"])  # type: ignore[index]
            iterations_of[half].append(gap)
        else:
            gap -= float(tool_ms.get(step["id"]) or 0)
            if half is not None:
                iterations_of[half][-1] += gap
        if half is not None:
            steps_of[half].append(gap)
    return {
        "overhead_p50_ms": {k: round(statistics.median(v), 3) for k, v in steps_of.items()},
        "iteration_overhead_p50_ms": {
            k: round(statistics.median(v), 3) for k, v in iterations_of.items()
        },
        "load_average": [round(x, 2) for x in load],
    }


def _row_sizes(step_ids: list[Any]) -> list[int]:
    from django.db import connection  # noqa: PLC0415

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT s.id, pg_column_size(s.*) + coalesce(("
            "  SELECT sum(pg_column_size(t.*)) FROM tools_toolcall t"
            "  WHERE t.step_id = s.id), 0)"
            " FROM agents_executionstep s WHERE s.id = ANY(%s)",
            [step_ids],
        )
        by_id = dict(cursor.fetchall())
    return [int(by_id[i]) for i in step_ids]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument(
        "--metrics", choices=["on", "off", "both", "cost"], default="on", help="Prometheus metrics"
    )
    parser.add_argument(
        "--decision-points",
        choices=["both", "alternate-replies"],
        help="flow's decision points off and on: alternated workers (both), or every other"
        " model reply of the same runs, in process (alternate-replies)",
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="with --metrics/--decision-points both"
    )
    args = parser.parse_args()
    if args.decision_points == "alternate-replies":
        alternate_replies(args.iterations, args.repeat)
        return
    if args.metrics == "both" or args.decision_points == "both":
        compare(
            args.iterations, args.repeat, "metrics" if args.metrics == "both" else "decision_points"
        )
        return
    if args.metrics == "cost":
        common.create_database()  # (a run's end is counted on its transaction's commit)
        try:
            metrics_cost(args.iterations)
        finally:
            common.drop_database()
        return
    common.create_database()
    facts = common.machine_facts()
    worker = common.worker(
        concurrency=4, AGENTDESK_METRICS="true" if args.metrics == "on" else "false"
    ).start()
    try:
        with FakeProviderServer() as server:
            run_once(server, 3)  # warm-up: imports, connections, caches
            short = run_once(server, 10)
            result = run_once(server, args.iterations)
    finally:
        worker.stop()
        common.drop_database()
    floor = facts.round_trip_ms + facts.commit_ms
    p50 = common.percentile(result["overhead_ms"], 50)
    p99 = common.percentile(result["overhead_ms"], 99)
    report = {
        "machine": facts.as_dict(),
        "metrics": args.metrics,
        "steps": result["steps"],
        "overhead_p50_ms": round(p50, 3),
        "overhead_p99_ms": round(p99, 3),
        "overhead_p50_above_rt_plus_commit_ms": round(p50 - floor, 3),
        "overhead_p99_above_rt_plus_commit_ms": round(p99 - floor, 3),
        "model_call_p50_ms": round(common.percentile(result["model_call_ms"], 50), 3),
        "tool_call_p50_ms": round(common.percentile(result["tool_ms"], 50), 3),
        "writing_transactions_per_step": round(result["writing_transactions"] / result["steps"], 3),
        "all_commits_per_step_incl_read_only": round(result["commits"] / result["steps"], 3),
        "wal_bytes_per_step_short_run": round(short["wal_bytes"] / short["steps"]),
        "wal_bytes_per_step_long_run": round(result["wal_bytes"] / result["steps"]),
        "row_bytes_per_step_first20": round(result["row_bytes_first20"]),
        "row_bytes_per_step_last20": round(result["row_bytes_last20"]),
    }
    print(facts.describe())
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
