"""Live updates: from a step's commit in a worker to a websocket client receiving it.

The real ASGI server (uvicorn running ``config.asgi:application``, as ``manage.py up`` runs it)
and the Redis pub/sub channel layer on the embedded (or configured) Redis. Three parts:

1. **Latency**: this process plays the worker. It commits think steps of one run through the
   runtime's own store path (``store.direct_step`` / ``StepTransaction.add_step``: one round
   trip, then the broadcast handed to ``core.realtime``'s publisher thread) at ``--rate`` steps
   per second, and notes each step's commit time (``CLOCK_MONOTONIC``, the moment the commit's
   round trip returned). Websocket clients in a process of their own (websockets' asyncio
   client, authenticated with an API key header, as docs/live-protocol.md says; permessage-
   deflate offered as browsers do, declined by the server as ``manage.py up`` runs it) note
   when each step's bytes reach their socket and when their reader gets it. Latency = arrival
   at the socket - commit, over every client and step, with 1, 10 and 50 clients (the
   reader's figure adds the time a message waits for its turn among 50 clients in one
   process: the harness's, not the server's). Every client must get every step once, in order.
2. **Cost to the worker per event**: thread-CPU timers around the two calls the committing
   thread makes per event (building the message in ``add_step``, and handing it to the
   publisher after the commit), and the publisher thread's own CPU (its thread CPU clock) over
   the same stretch. Also the CPU of the ASGI server and of the clients per message delivered.
3. **Step overhead with watchers**: ``bench.step_overhead``'s measurement (a real Celery worker,
   100 ReAct iterations, zero-latency model), its run watched by ``--watchers`` websocket clients
   subscribed before it starts, against the same run watched by none; alternated ``--repeat``
   times, with the CPU per step of the worker, the ASGI server and PostgreSQL (kernel counters,
   10 ms ticks) over each run.

Machine facts from the same run: PostgreSQL's round trip and durable commit (as every
benchmark), one Redis pub/sub hop (PUBLISH on one connection to the message on a subscribed
one, the floor of any Redis channel layer), and how many of the machine's cores were busy
during each measurement (all processes: the machine is shared).

    .venv/bin/python -m bench.live_latency [--events 1000 --rate 100 --clients 1,10,50]
        [--watchers 50 --iterations 100 --repeat 3]   (--clients "": the step overhead only;
                                                        --watchers 0: the latency only)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection
from typing import Any

import psutil
import redis
from django.conf import settings

from agents.lifecycle import broadcasting
from agents.models import Execution, StepType
from agents.runtime import store
from agents.services.start import enqueue_execution
from bench import common
from bench import step_overhead as overhead_bench
from core import realtime
from core.models import Role
from core.realtime import publishing
from tests.agents.factories import AgentFactory
from tests.api.conftest import new_key
from tests.live.helpers import ScriptedRun
from tests.processes import AsgiServer

TERMINAL_MARK = '"to_status": "completed"'
# What a model reply's think step looks like: a few hundred characters of reasoning.
REASONING = (
    "The contact exists and was last written to three weeks ago; the open task is the follow-up "
    "about the renewal, so the next step is to look up the account's plan and draft a short "
    "reply that names the renewal date and asks whether the current seat count still fits."
)


# --- the clients (a process of their own) ----------------------------------------------------


def _clients_main(url: str, key: str, count: int, pipe: Connection) -> None:
    """Open ``count`` sockets to ``url``; say "ready" once each has caught up; note each
    message's arrival until the run completes; send back, per client, (seq, arrival ns) of
    its step events and the seqs of everything sequenced it got."""
    import uvloop  # noqa: PLC0415 - uvicorn's loop: the clients should be the fast side

    asyncio.run(_clients(url, key, count, pipe), loop_factory=uvloop.new_event_loop)


async def _clients(url: str, key: str, count: int, pipe: Connection) -> None:
    from websockets.asyncio.client import ClientConnection, connect  # noqa: PLC0415

    class Stamped(ClientConnection):
        """Notes when bytes last reached the socket: with many clients in one process, the
        time a message waits for its turn in this process is the harness's, not the server's."""

        arrived = 0

        def data_received(self, data: bytes) -> None:
            self.arrived = time.monotonic_ns()
            super().data_received(data)

    headers = {"Authorization": f"Bearer {key}"}
    gate = asyncio.Semaphore(10)

    async def open_one() -> Stamped:
        async with gate:
            ws = await connect(
                url, additional_headers=headers, open_timeout=30, max_queue=None, proxy=None,
                create_connection=Stamped,
            )  # fmt: skip
            assert isinstance(ws, Stamped)
            snapshot_seq = None
            async for raw in ws:  # the snapshot, then the run's history up to it
                message = json.loads(raw)
                if message["type"] == "snapshot":
                    snapshot_seq = message["seq"]
                elif message.get("seq") == snapshot_seq:
                    return ws
            raise RuntimeError("closed before catching up")

    sockets = await asyncio.gather(*(open_one() for _ in range(count)))
    cpu_before = time.process_time()
    pipe.send("ready")

    async def read(ws: Stamped) -> list[tuple[int, int, str]]:
        received: list[tuple[int, int, str]] = []
        async for raw in ws:
            assert isinstance(raw, str)
            received.append((ws.arrived, time.monotonic_ns(), raw))  # parsed later
            if raw.startswith('{"type": "status"') and TERMINAL_MARK in raw:
                break
        await ws.close()
        return received

    results = await asyncio.gather(*(read(ws) for ws in sockets))
    cpu = time.process_time() - cpu_before
    per_client = []
    for received in results:
        steps: list[tuple[int, int, int]] = []
        sequenced: list[int] = []
        for at_socket, at_reader, raw in received:
            message = json.loads(raw)
            if "seq" in message and message["type"] != "snapshot":
                sequenced.append(message["seq"])
            if message["type"] == "step":
                steps.append((message["seq"], at_socket, at_reader))
        per_client.append({"steps": steps, "sequenced": sequenced})
    pipe.send({"clients": per_client, "cpu_seconds": cpu})


class Clients:
    """``count`` websocket clients of one execution, in a spawned process."""

    def __init__(self, server: AsgiServer, execution: Execution, key: str, count: int) -> None:
        context = multiprocessing.get_context("spawn")  # a fresh interpreter, no forked state
        self.parent, child = context.Pipe()
        url = f"{server.ws_url}/ws/executions/{execution.id}/"
        self.process = context.Process(
            target=_clients_main, args=(url, key, count, child), daemon=True
        )

    def __enter__(self) -> Clients:
        self.process.start()
        if not self.parent.poll(120) or self.parent.recv() != "ready":
            raise RuntimeError("the websocket clients did not connect")
        return self

    def results(self, timeout: float = 60) -> dict[str, Any]:
        if not self.parent.poll(timeout):
            raise RuntimeError("the websocket clients did not see the run complete")
        result: dict[str, Any] = self.parent.recv()
        return result

    @property
    def pid(self) -> int:
        assert self.process.pid is not None
        return self.process.pid

    def __exit__(self, *exc: object) -> None:
        self.process.join(10)
        if self.process.is_alive():
            self.process.terminate()


# --- machine fact: one Redis pub/sub hop -------------------------------------------------------


def redis_hop_ms(samples: int = 300) -> float:
    """p50 of PUBLISH on one connection to the message read on another that subscribed."""
    publisher = redis.Redis.from_url(settings.REDIS_URL)
    subscriber = redis.Redis.from_url(settings.REDIS_URL).pubsub(ignore_subscribe_messages=True)
    channel = f"bench-hop-{time.monotonic_ns()}"
    subscriber.subscribe(channel)
    subscriber.get_message(timeout=1)  # the subscription's confirmation
    hops = []
    for i in range(samples):
        started = time.perf_counter()
        publisher.publish(channel, str(i))
        message = None
        while message is None:
            message = subscriber.get_message(timeout=1)
        hops.append((time.perf_counter() - started) * 1000)
    subscriber.close()
    publisher.close()
    return statistics.median(hops)


# --- the worker's side: commits, timed -------------------------------------------------------


class HotPathTimer:
    """Thread-CPU and wall time of what the committing thread does per event: building the
    message (``agents.lifecycle.broadcasting.broadcast``, called by ``add_step``) and, after the
    commit, handing it to the publisher (the step's after-commit callback:
    ``realtime.broadcast``); and the publisher thread's own CPU over the same stretch."""

    def __init__(self) -> None:
        self.cpu_ns = {"build": 0, "hand_over": 0}
        self.wall_ns = {"build": 0, "hand_over": 0}
        self.publisher_cpu_ns = 0

    def timed(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            cpu, wall = time.thread_time_ns(), time.perf_counter_ns()
            try:
                return function(*args, **kwargs)
            finally:
                self.cpu_ns[name] += time.thread_time_ns() - cpu
                self.wall_ns[name] += time.perf_counter_ns() - wall

        return timed

    @contextmanager
    def measuring(self) -> Iterator[HotPathTimer]:
        build = broadcasting.broadcast
        broadcasting.broadcast = self.timed("build", build)
        clock = _publisher_clock()
        before = time.clock_gettime_ns(clock)
        try:
            yield self
        finally:
            realtime.flush()
            self.publisher_cpu_ns = time.clock_gettime_ns(clock) - before
            broadcasting.broadcast = build


def _publisher_clock() -> int:
    """The CPU clock of this process's live-update publisher thread (started if need be)."""
    publisher = publishing._publisher
    publisher._ensure_started()
    assert publisher._thread is not None
    assert publisher._thread.ident is not None
    return time.pthread_getcpuclockid(publisher._thread.ident)


def write_steps(
    run: ScriptedRun, *, count: int, rate: float, timer: HotPathTimer | None = None
) -> dict[int, int]:
    """Commit ``count`` think steps at ``rate`` per second; each step's commit time by seq."""
    committed: dict[int, int] = {}
    interval = 1 / rate
    started = time.monotonic()
    for i in range(count):
        delay = started + i * interval - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        with store.direct_step(run.execution, run.worker) as tx:
            tx.add_step(
                StepType.THINK, reasoning=REASONING, model="bench-model",
                tokens_input=812, tokens_output=64,
            )  # fmt: skip
            callbacks = tx.after_commit
            assert callbacks is not None, "a direct step: its broadcasts follow its commit"
            if timer is not None:
                callbacks[:] = [timer.timed("hand_over", callback) for callback in callbacks]
            # First of the callbacks: the moment the commit's round trip returned.
            callbacks.insert(0, _stamp(committed, run.execution.sequence))
    return committed


def _stamp(committed: dict[int, int], seq: int) -> Callable[[], None]:
    def stamp() -> None:
        committed[seq] = time.monotonic_ns()

    return stamp


def _in_order_once(sequenced: list[int], last: int) -> bool:
    """Every event number from the first one a client got up to ``last``, once, in order."""
    return bool(sequenced) and sequenced == list(range(sequenced[0], last + 1))


class MachineLoad:
    """How busy the machine's cores were over a stretch (all processes, ``/proc/stat``): the
    benchmarks share the machine, and a busy one shows in every tail figure."""

    def __enter__(self) -> MachineLoad:
        self.before = psutil.cpu_times()
        return self

    def __exit__(self, *exc: object) -> None:
        self.after = psutil.cpu_times()

    def busy_cores(self) -> float:
        idle = ("idle", "iowait")
        spent = {
            name: getattr(self.after, name) - getattr(self.before, name)
            for name in self.after._fields
            if name not in ("guest", "guest_nice")  # counted in user and nice already
        }
        total = sum(spent.values())
        busy = total - sum(spent.get(name, 0.0) for name in idle)
        return (psutil.cpu_count() or 1) * busy / total if total else 0.0

    def report(self, *, ours: float | None = None) -> dict[str, float]:
        """Cores busy on average, and of them those of the benchmark's processes (``ours``:
        cores, PostgreSQL not included)."""
        busy = {"cores": psutil.cpu_count() or 1, "cores_busy": round(self.busy_cores(), 2)}
        if ours is not None:
            busy["cores_busy_bench_processes"] = round(ours, 2)
        return busy


def latency_level(
    server: AsgiServer, *, clients: int, events: int, warmup: int, rate: float
) -> dict[str, Any]:
    agent = AgentFactory.create()
    key = new_key(agent.agency, Role.VIEWER)
    run = ScriptedRun.start(agent)
    with Clients(server, run.execution, key, clients) as watching:
        write_steps(run, count=warmup, rate=rate)
        timer = HotPathTimer()
        meter = common.CpuMeter(
            asgi=[_pid(server)], clients=[watching.pid], bench=[os.getpid()]
        )  # the bench's own process last: the others are its children
        with meter, timer.measuring(), MachineLoad() as load:
            committed = write_steps(run, count=events, rate=rate, timer=timer)
        run.finish()
        realtime.flush()
        received = watching.results()
    measured = set(committed)
    latencies: list[float] = []
    at_reader: list[float] = []
    fastest: dict[int, float] = {}
    complete = True
    for client in received["clients"]:
        complete = complete and _in_order_once(client["sequenced"], run.execution.sequence)
        for seq, at_socket, read in client["steps"]:
            if seq in measured:
                ms = (at_socket - committed[seq]) / 1e6
                latencies.append(ms)
                at_reader.append((read - committed[seq]) / 1e6)
                fastest[seq] = min(fastest.get(seq, ms), ms)
    delivered = len(latencies)
    cpu = meter.cpu_seconds()
    steps_of = {"asgi": delivered, "clients": delivered}
    return {
        "clients": clients,
        "events": events,
        "rate_per_second": rate,
        "delivered": delivered,
        "expected": events * clients,
        "every_client_got_every_event_once_in_order": complete and delivered == events * clients,
        "latency_ms": _percentiles(latencies),
        "latency_to_the_clients_reader_ms": _percentiles(at_reader),
        "fastest_client_latency_ms": _percentiles(list(fastest.values())),
        "worker_cpu_ms_per_event": {
            "build_message": round(timer.cpu_ns["build"] / events / 1e6, 4),
            "hand_over_after_commit": round(timer.cpu_ns["hand_over"] / events / 1e6, 4),
            "committing_thread_total": round(sum(timer.cpu_ns.values()) / events / 1e6, 4),
            "publisher_thread": round(timer.publisher_cpu_ns / events / 1e6, 4),
        },
        "worker_wall_ms_per_event_on_committing_thread": round(
            sum(timer.wall_ns.values()) / events / 1e6, 4
        ),
        "cpu_ms_per_message_delivered": {
            name: round(cpu[name] * 1000 / count, 4) for name, count in steps_of.items()
        },
        "asgi_server_cpu_fraction_of_a_core": round(cpu["asgi"] / meter.seconds, 2),
        "machine": load.report(ours=(cpu["asgi"] + cpu["clients"] + cpu["bench"]) / meter.seconds),
    }


def _pid(server: AsgiServer) -> int:
    assert server.process is not None
    return server.process.pid


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    return {
        "p50": round(common.percentile(values, 50), 3),
        "p95": round(common.percentile(values, 95), 3),
        "p99": round(common.percentile(values, 99), 3),
        "max": round(max(values), 3),
    }


# --- step overhead, watched and not ----------------------------------------------------------


class WatchedCreate:
    """Stands in for ``execution_create`` in ``bench.step_overhead``: the run is created
    pending, ``watchers`` clients subscribe to it and catch up, then it goes to the worker."""

    def __init__(self, server: AsgiServer, watchers: int, *, worker_pid: int) -> None:
        self.server = server
        self.watchers = watchers
        self.clients: Clients | None = None
        self.load = MachineLoad()
        # From the run's start to its analysis: the watchers' process counts with the bench's.
        self.meter = common.CpuMeter(worker=[worker_pid], asgi=[_pid(server)], bench=[os.getpid()])

    def __call__(self, *, agent: Any, input: str) -> Execution:
        # The caller is inside the agency's transaction, which the watchers cannot see into:
        # the run and the key are committed on a connection of their own.
        made: dict[str, Any] = {}
        thread = threading.Thread(target=self._create, args=(agent, made))
        thread.start()
        thread.join()
        execution: Execution = made["execution"]
        if self.watchers:
            self.clients = Clients(self.server, execution, made["key"], self.watchers)
            self.clients.__enter__()
        self.load.__enter__()
        self.meter.__enter__()
        enqueue_execution(execution)  # sent when the caller's transaction commits, as before
        return execution

    def _create(self, agent: Any, made: dict[str, Any]) -> None:
        from django.db import connection  # noqa: PLC0415

        try:
            made["execution"] = common.pending_execution(agent)
            made["key"] = new_key(agent.agency, Role.VIEWER)
        finally:
            connection.close()

    def collect(self, *, steps: int) -> dict[str, Any]:
        """How busy the machine was during the run, the CPU per step of the worker, the ASGI
        server and PostgreSQL and, when watched, what the watchers got."""
        self.load.__exit__(None, None, None)
        self.meter.__exit__(None, None, None)
        collected: dict[str, Any] = {"machine_cores_busy": round(self.load.busy_cores(), 2)}
        collected |= {
            f"cpu_ms_per_step_{name}": round(seconds * 1000 / steps, 3)
            for name, seconds in self.meter.cpu_seconds().items()
        }
        if self.clients is not None:
            received = self.clients.results()
            self.clients.__exit__(None, None, None)
            got = [len(client["steps"]) for client in received["clients"]]
            collected |= {"watchers": len(got), "steps_each": sorted(set(got))}
        return collected


def step_overhead(
    server: AsgiServer, *, watchers: int, iterations: int, repeat: int
) -> dict[str, Any]:
    from devkit.fake_server import FakeProviderServer  # noqa: PLC0415

    results: dict[str, list[dict[str, Any]]] = {"none": [], "watched": []}
    original = overhead_bench.execution_create
    worker = common.worker(concurrency=4).start()
    try:
        with FakeProviderServer() as provider:
            warm_up = WatchedCreate(server, 0, worker_pid=worker.process.pid)
            overhead_bench.execution_create = warm_up  # type: ignore[assignment]
            overhead_bench.run_once(provider, 3)  # warm-up: imports, connections, caches
            for _ in range(repeat):
                for mode, count in (("none", 0), ("watched", watchers)):
                    create = WatchedCreate(server, count, worker_pid=worker.process.pid)
                    overhead_bench.execution_create = create  # type: ignore[assignment]
                    result = overhead_bench.run_once(provider, iterations)
                    result["per_run"] = create.collect(steps=result["steps"])
                    results[mode].append(result)
    finally:
        overhead_bench.execution_create = original
        worker.stop()

    def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
        p50s = [common.percentile(r["overhead_ms"], 50) for r in runs]
        p99s = [common.percentile(r["overhead_ms"], 99) for r in runs]
        return {
            "overhead_p50_ms": [round(v, 3) for v in p50s],
            "overhead_p99_ms": [round(v, 3) for v in p99s],
            "overhead_p50_ms_median": round(statistics.median(p50s), 3),
            "overhead_p99_ms_median": round(statistics.median(p99s), 3),
            "model_call_p50_ms": round(
                statistics.median(common.percentile(r["model_call_ms"], 50) for r in runs), 3
            ),
            "per_run": [r["per_run"] for r in runs],
        }

    none, watched = summary(results["none"]), summary(results["watched"])
    return {
        "iterations": iterations,
        "watchers": watchers,
        "none": none,
        "watched": watched,
        "p50_ratio_watched_to_none": round(
            watched["overhead_p50_ms_median"] / none["overhead_p50_ms_median"], 3
        ),
        "p99_ratio_watched_to_none": round(
            watched["overhead_p99_ms_median"] / none["overhead_p99_ms_median"], 3
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1000, help="measured steps per level")
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--rate", type=float, default=100.0, help="steps per second")
    parser.add_argument("--clients", default="1,10,50", help="levels, comma-separated")
    parser.add_argument("--watchers", type=int, default=50, help="0: skip the step overhead")
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    common.create_database()
    facts = common.machine_facts()
    hop = redis_hop_ms()
    server = AsgiServer(LOG_LEVEL="WARNING").start()
    try:
        levels = [
            latency_level(
                server, clients=int(n), events=args.events, warmup=args.warmup, rate=args.rate
            )
            for n in args.clients.split(",")
            if n
        ]
        overhead = (
            step_overhead(
                server, watchers=args.watchers, iterations=args.iterations, repeat=args.repeat
            )
            if args.watchers
            else None
        )
    finally:
        server.stop()
        common.drop_database()
    for level in levels:
        level["latency_p50_over_redis_hop"] = round(level["latency_ms"]["p50"] / hop, 1)
        level["latency_p99_over_redis_hop"] = round(level["latency_ms"]["p99"] / hop, 1)
    report = {
        "machine": {**facts.as_dict(), "redis_pubsub_hop_ms": round(hop, 3)},
        "broadcast_batch_ms": settings.AGENTDESK_BROADCAST_BATCH_MS,
        "latency": levels,
        "step_overhead": overhead,
    }
    print(f"{facts.describe()}; Redis pub/sub hop p50 {hop:.3f} ms")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
