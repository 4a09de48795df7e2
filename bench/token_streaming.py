"""What token streaming costs: the watcher check a run nobody watches pays before each model call,
and what streaming a run to one watcher costs.

Runs of the ReAct loop on one thread of this process (as ``bench.cpu_split``: no worker pool, no
contention), zero-latency fake model in a process of its own whose replies carry ~60 words of
text, everything persisted and broadcast as in production. Four modes, alternated, each run
``--repeat`` times:

- ``off``: ``AGENTDESK_TOKEN_STREAMING=false``: no check, unstreamed calls (the code before);
- ``unwatched``: the default: the run's group registered with the process's listener watch
  (``core.realtime.listening.Listeners``: a background thread asks Redis for all the process's
  runs every ``AGENTDESK_TOKEN_WATCH_SECONDS``), the check before each call a lookup; the run's
  first call may ask Redis itself;
- ``ask_every_call``: for comparison, the simplest design, not the product's: one
  ``PUBSUB NUMSUB`` round trip on the run's thread before every call;
- ``watched``: one subscriber on the execution's group (a plain Redis subscription, as the
  pub/sub layer's consumers make, in a process of its own): every call streamed, its text
  published.

Per model call: the check's own wall and thread-CPU time (timers around it; the timers' own
cost is printed), the Redis commands asked (all threads), and the run's wall and CPU (the run's
thread; the process's other threads: the live-update publisher, the listener watch) per
iteration; the step overhead of the same run, as ``bench.step_overhead`` counts it (time between
two steps' commits minus the model call or the tool handler), and the check's cost as a
fraction of it. Also, outside any run: one ``PUBSUB NUMSUB`` round trip, and the lookup of a
registered group's answer.

    .venv/bin/python -m bench.token_streaming [--iterations 100] [--repeat 3] [--kind openai]
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import multiprocessing
import os
import statistics
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis
from channels.layers import get_channel_layer
from django.test import override_settings

from agents.lifecycle import protocol
from agents.models import Execution, StepType
from agents.runtime import streaming
from agents.runtime.loop import run_execution
from bench import common
from core import realtime, tenancy
from core.realtime import listening, publishing
from crm.models import Contact
from tools.models import ToolCall

MODES = ("off", "unwatched", "ask_every_call", "watched")
SETTINGS: dict[str, dict[str, Any]] = {
    "off": {"AGENTDESK_TOKEN_STREAMING": False},
    "unwatched": {},
    "ask_every_call": {},
    "watched": {},
}
TEXT = (
    "Looking the contact up again to be sure nothing changed since the last time: the e-mail "
    "address is the key, and the record's notes, tasks and open conversations come with it, "
    "so the next step can decide whether anything needs an answer today or can wait for later."
)


def script(request: Any) -> Any:
    """``common.iterations_script`` with text in every reply (what a watcher is streamed)."""
    from devkit.fake_server.script import text_reply, tool_call_reply  # noqa: PLC0415

    if request.assistant_turns < int(request.model.rsplit("-", 1)[1]):
        return tool_call_reply("crm_get_contact", {"email": common.LOOKUP_EMAIL}, text=TEXT)
    return text_reply(TEXT)


class Subscriber:
    """One watcher of an execution: a subscription to its group's channel, in a process of its
    own (its CPU is the watcher's, not the worker's), counting the token messages it gets."""

    def __init__(self, execution: Execution) -> None:
        target = publishing._pubsub_target(get_channel_layer())
        assert target is not None, "needs the Redis pub/sub channel layer"
        url, prefix = target
        channel = publishing._group_channel(prefix, realtime.execution_group(execution.id))
        context = multiprocessing.get_context("fork")
        self._ready, self._done = context.Event(), context.Event()
        self._messages, self._chars = context.Value("i", 0), context.Value("i", 0)
        self._process = context.Process(target=self._listen, args=(url, channel), daemon=True)
        self._process.start()
        if not self._ready.wait(10):
            raise RuntimeError("the subscriber did not subscribe")

    def _listen(self, url: str, channel: str) -> None:
        layer = get_channel_layer()
        pubsub = redis.Redis.from_url(url).pubsub(ignore_subscribe_messages=True)
        pubsub.subscribe(channel)
        pubsub.get_message(timeout=2)
        self._ready.set()
        while True:
            message = pubsub.get_message(timeout=0.05)
            if message is None or message["type"] != "message":
                continue
            data = layer.deserialize(message["data"])
            if data["type"] == protocol.GROUP_TOKEN:
                self._messages.value += 1
                self._chars.value += len(data["text"])
            elif data.get("kind") == "status" and data["status"] == "completed":
                self._done.set()

    def close(self) -> tuple[int, int]:
        """Token messages and characters received, once the run's end arrived."""
        self._done.wait(5)
        self._process.terminate()
        self._process.join(5)
        return self._messages.value, self._chars.value


def ask_now(group: str) -> bool:
    """``ask_every_call``'s check: one round trip, whatever the listener watch knows."""
    answer = listening.listeners._ask([group])
    return bool(answer and answer[0])


@contextmanager
def timed_check(times: dict[str, list[float]], *, ask_every_call: bool) -> Iterator[None]:
    """Wall and thread-CPU microseconds of each watcher check (``Watchers.watched``)."""
    original, lookup = streaming.Watchers.watched, listening.has_listeners

    @functools.wraps(original)
    def watched(self: streaming.Watchers) -> bool:
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            return original(self)
        finally:
            times["wall_us"].append((time.perf_counter() - wall) * 1e6)
            times["cpu_us"].append((time.thread_time() - cpu) * 1e6)

    streaming.Watchers.watched = watched  # type: ignore[method-assign]
    if ask_every_call:
        listening.has_listeners = ask_now
    try:
        yield
    finally:
        streaming.Watchers.watched = original  # type: ignore[method-assign]
        listening.has_listeners = lookup


def timer_overhead_us(samples: int = 20000) -> float:
    """What the timers around a check add to it: the same wrapper around a function that does
    nothing."""
    times: list[float] = []

    def nothing() -> bool:
        return False

    for _ in range(samples):
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            nothing()
        finally:
            times.append((time.perf_counter() - wall) * 1e6)
            _ = (time.thread_time() - cpu) * 1e6
    return statistics.fmean(times)


def step_overheads(execution: Execution) -> list[float]:
    """Per committed step: time from the previous step's commit, minus the model call (think)
    or the tool handler (act), in ms (bench.step_overhead's measure)."""
    with tenancy.agency_context(execution.agency_id):
        steps = list(
            Execution.objects.get(pk=execution.pk)
            .steps.order_by("step_number")
            .values("step_type", "completed_at", "llm_response", "id")
        )
        tool_ms = {
            step_id: common.elapsed_ms(started, completed)
            for step_id, started, completed in ToolCall.objects.filter(
                execution_id=execution.id
            ).values_list("step_id", "started_at", "completed_at")
        }
    overheads = []
    for previous, step in itertools.pairwise(steps):
        gap = (step["completed_at"] - previous["completed_at"]).total_seconds() * 1000  # type: ignore[operator]
        if step["step_type"] == StepType.THINK:
            gap -= float(step["llm_response"]["latency_ms"])  # type: ignore[index, operator]
        else:
            gap -= float(tool_ms.get(step["id"]) or 0)
        overheads.append(gap)
    return overheads


def looping_agent(server: Any, iterations: int, kind: str) -> Any:
    """``common.looping_agent`` on either wire format."""
    agent = common.make_agent(
        server, kind=kind, llm_model=f"loop-{uuid.uuid4().hex[:8]}-{iterations}"
    )
    with tenancy.agency_context(agent.agency_id):
        Contact.objects.create(
            agency_id=agent.agency_id, first_name="Ada", email=common.LOOKUP_EMAIL
        )
    return agent


def run_once(server: Any, iterations: int, mode: str, kind: str) -> dict[str, float]:
    # The agent's model name says how many iterations its runs last (script).
    execution = common.pending_execution(looping_agent(server, iterations, kind))
    subscriber = Subscriber(execution) if mode == "watched" else None
    check: dict[str, list[float]] = {"wall_us": [], "cpu_us": []}
    calls = iterations + 1
    meter = common.CpuMeter(this_process=[os.getpid()])
    asks = listening.listeners.asks
    with (
        override_settings(**SETTINGS[mode]),
        timed_check(check, ask_every_call=mode == "ask_every_call"),
        meter,
    ):
        wall, cpu = time.perf_counter(), time.thread_time()
        assert run_execution(execution.id, agency_id=execution.agency_id) == "completed"
        wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
        realtime.flush()
    received = subscriber.close() if subscriber is not None else (0, 0)
    overheads = step_overheads(execution)
    result = {
        "wall_ms_per_iteration": wall * 1000 / calls,
        "run_thread_cpu_ms_per_iteration": cpu * 1000 / calls,
        "other_threads_cpu_ms_per_iteration": (meter.cpu_seconds()["this_process"] - cpu)
        * 1000
        / calls,
        "step_overhead_p50_ms": common.percentile(overheads, 50),
        "step_overhead_mean_ms": statistics.fmean(overheads),
        "check_wall_us_per_call": sum(check["wall_us"]) / calls,
        "check_cpu_us_per_call": sum(check["cpu_us"]) / calls,
        "check_wall_us_p50": statistics.median(check["wall_us"]),
        "check_wall_us_max": max(check["wall_us"]),
        "redis_asks_per_call": (listening.listeners.asks - asks) / calls,
    }
    if subscriber is not None:
        result["token_messages_per_call"] = received[0] / calls
        result["token_chars_per_call"] = received[1] / calls
    return result


def bare_checks(samples: int = 2000) -> dict[str, float]:
    """Outside any run: one ``PUBSUB NUMSUB`` round trip, and a registered group's lookup."""
    group = f"execution.{uuid.uuid4()}"
    ask_now(group)  # connected
    walls, cpus = [], []
    for _ in range(samples):
        wall, cpu = time.perf_counter(), time.thread_time()
        ask_now(group)
        walls.append((time.perf_counter() - wall) * 1e6)
        cpus.append((time.thread_time() - cpu) * 1e6)
    listening.listeners.register(group)
    try:
        listening.has_listeners(group)  # answered
        started = time.perf_counter()
        for _ in range(samples * 50):
            listening.has_listeners(group)
        lookup_us = (time.perf_counter() - started) * 1e6 / (samples * 50)
    finally:
        listening.listeners.unregister(group)
    return {
        "pubsub_numsub_wall_us_p50": round(statistics.median(walls), 1),
        "pubsub_numsub_wall_us_p99": round(common.percentile(walls, 99), 1),
        "pubsub_numsub_cpu_us_mean": round(statistics.fmean(cpus), 1),
        "registered_lookup_us": round(lookup_us, 3),
        "check_timers_us": round(timer_overhead_us(), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--kind", choices=["openai", "anthropic"], default="openai")
    args = parser.parse_args()
    common.create_database()
    try:
        facts = common.machine_facts()
        with common.FakeServerProcess(script) as server:
            for mode in MODES:
                run_once(server, 3, mode, args.kind)  # warm-up: imports, connections, caches
            runs: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
            for _ in range(args.repeat):
                for mode in MODES:
                    runs[mode].append(run_once(server, args.iterations, mode, args.kind))
            bare = bare_checks()
    finally:
        common.drop_database()
    medians = {
        mode: {key: round(statistics.median(r[key] for r in results), 3) for key in results[0]}
        for mode, results in runs.items()
    }
    report: dict[str, Any] = {
        "machine": facts.as_dict(),
        "wire": args.kind,
        "iterations": args.iterations,
        "runs_per_mode": args.repeat,
        "outside_a_run": bare,
        "modes_median": medians,
    }
    for mode in ("unwatched", "ask_every_call"):
        figures = medians[mode]
        report[f"{mode}_check_per_call_vs_step_overhead"] = {
            "check_wall_us": figures["check_wall_us_per_call"],
            "check_cpu_us": figures["check_cpu_us_per_call"],
            "step_overhead_mean_us": round(figures["step_overhead_mean_ms"] * 1000, 1),
            "check_wall_over_step_overhead": round(
                figures["check_wall_us_per_call"] / (figures["step_overhead_mean_ms"] * 1000), 4
            ),
        }
    off, watched = medians["off"], medians["watched"]
    report["watched_minus_off_per_call"] = {
        key: round(watched[key] - off[key], 3)
        for key in (
            "wall_ms_per_iteration",
            "run_thread_cpu_ms_per_iteration",
            "other_threads_cpu_ms_per_iteration",
            "step_overhead_mean_ms",
        )
    }
    print(facts.describe())
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
