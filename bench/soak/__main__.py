"""``python -m bench.soak``: the platform as ``manage.py up`` runs it (embedded PostgreSQL and
Redis, the demo model and agency, web, worker, beat) under a mixed load from Locust, headless,
for ``--minutes``; then requests/s and p50/p95/p99 per page and endpoint, answers 500 and above,
stalled pools replaced, the database connections of web and worker over time, their resident
memory after warm-up and at the end, and the machine facts of the same run (bench/README.md).

Users (``--staff``, ``--approvers``, ``--api-clients``, ``--webhook-senders``, ``--watchers``):
see bench/soak/locustfile.py. Everything goes to ``--out`` (report.json, report.md, the
platform's log up.log, Locust's CSV files); the data folder (``--data-dir``, default
``AGENTDESK_DATA_DIR`` or .data) holds the embedded servers, started if they are not running
and stopped at the end if this run started them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
from django.conf import settings

from bench.machine import measure
from bench.soak import fixture, memory, report
from bench.soak.sampling import Sampler
from bench.soak.stack import ROOT, Stack

LOCUSTFILE = Path(__file__).with_name("locustfile.py")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--port", type=int, default=0, help="web port (default: a free one)")
    parser.add_argument("--staff", type=int, default=6)
    parser.add_argument("--approvers", type=int, default=2)
    parser.add_argument("--api-clients", type=int, default=4)
    parser.add_argument("--webhook-senders", type=int, default=1)
    parser.add_argument("--watchers", type=int, default=50)
    parser.add_argument("--sample-seconds", type=float, default=5.0)
    parser.add_argument(
        "--warmup-seconds",
        type=float,
        default=None,
        help="RSS baseline at least this late, and once every page has been served (default: a "
        "tenth of the soak)",
    )
    parser.add_argument(
        "--memory-dumps",
        type=float,
        default=0,
        metavar="SECONDS",
        help="the web process's memory dumped every SECONDS and at the end into OUT/memory "
        "(ops/memory_dump.py: tracemalloc on from the first dump; compare two with python -m "
        "bench.soak.memory; 0: off)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    from devkit import embedded  # noqa: PLC0415

    setup_data_dir = embedded.data_dir()  # the folder Django was set up with (bench/__init__)
    data_dir = args.data_dir or Path(os.environ.get("AGENTDESK_DATA_DIR") or ROOT / ".data")
    data_dir = data_dir.resolve()
    os.environ["AGENTDESK_DATA_DIR"] = str(data_dir)

    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = (args.out or data_dir / f"soak-{stamp}").resolve()
    out.mkdir(parents=True, exist_ok=True)
    seconds = args.minutes * 60
    warmup = args.warmup_seconds if args.warmup_seconds is not None else seconds / 10
    users = {
        "Staff": args.staff,
        "Approver": args.approvers,
        "ApiClient": args.api_clients,
        "WebhookSender": args.webhook_senders,
        "Watcher": args.watchers,
    }
    services = embedded.ensure_running()
    # Importing `bench` set Django up, which started the servers of AGENTDESK_DATA_DIR if they
    # were down: stopped at the end too when that is this soak's folder.
    stop_servers = services.started or (
        settings.SERVICES.started_embedded and embedded.data_dir() == setup_data_dir
    )
    dumps = memory.environment(out / "memory") if args.memory_dumps else None
    port = args.port or embedded.free_port()
    stack = Stack(data_dir=data_dir, port=port, log=out / "up.log", env=dumps)
    try:
        print(f"soak: starting the platform (log: {stack.log})", flush=True)
        stack.start()
        facts = measure(services.database_url(embedded.OWNER_ROLE))
        prepared = fixture.prepare(
            stack.url, api_clients=args.api_clients, webhooks=2 if args.webhook_senders else 0
        )
        (out / "fixture.json").write_text(json.dumps(prepared, indent=1))
        pids = stack.pids()
        socket_dir, port = _postgres_socket(services.database_url(embedded.SUPERUSER_ROLE))
        sampler = Sampler(
            admin_url=services.database_url(embedded.SUPERUSER_ROLE, "postgres"),
            socket_path=f"{socket_dir}/.s.PGSQL.{port}",
            groups={name: pids[name] for name in ("web", "worker", "beat") if name in pids},
            metrics_url=f"{stack.url}/metrics",
            every=args.sample_seconds,
        )
        load_before = os.getloadavg()
        cpu = CpuShare(stack, embedded.running_pids())
        sampler.start()
        dumper = memory.Dumper(pids["web"], args.memory_dumps).start() if dumps else None
        log_start = stack.lines()  # the start's 503s (/healthz before the worker) are not counted
        print(f"soak: {users} for {seconds:.0f} s against {stack.url}", flush=True)
        started = time.monotonic()
        _run_locust(stack.url, out, users, seconds)
        elapsed = time.monotonic() - started
        if dumper is not None:
            dumper.stop()
        sampler.stop()
        shares = cpu.finish()
        result = _report(
            out, stack.web_lines(log_start), sampler, facts, users, elapsed, warmup, load_before,
            shares,
        )  # fmt: skip
    finally:
        stack.stop()
        if stop_servers:
            embedded.stop()
    (out / "report.json").write_text(json.dumps(result, indent=1, default=str))
    (out / "report.md").write_text(report.markdown(result))
    print(report.markdown(result))
    print(f"soak: report in {out}")
    return result


def _postgres_socket(url: str) -> tuple[str, int]:
    from urllib.parse import unquote, urlsplit  # noqa: PLC0415

    parts = urlsplit(url)
    host, _, port = parts.netloc.rpartition("@")[2].rpartition(":")
    return unquote(host), int(port)


def _run_locust(url: str, out: Path, users: dict[str, int], seconds: float) -> None:
    """Locust in a process of its own (gevent patches the interpreter it runs in)."""
    env = dict(
        os.environ,
        SOAK_FIXTURE=str(out / "fixture.json"),
        SOAK_USERS=json.dumps(users),
        SOAK_TALLY=str(out / "tally.json"),
        PYTHONPATH=str(ROOT),
    )
    command = [
        sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--host", url,
        "--users", str(sum(users.values())), "--spawn-rate", "10",
        "--run-time", f"{int(seconds)}s", "--stop-timeout", "20",
        "--csv", str(out / "locust"), "--only-summary", "--loglevel", "WARNING",
        "--exit-code-on-error", "0",
    ]  # fmt: skip
    with (out / "locust.log").open("wb") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        code = process.wait(seconds + 180)
    if code != 0:
        raise RuntimeError(f"locust exited {code}: {(out / 'locust.log').read_text()[-3000:]}")


class CpuShare:
    """How busy the machine's cores were over the soak and how much of it was this soak's
    processes (the platform, its PostgreSQL and Redis, Locust): the rest was other work."""

    def __init__(self, stack: Stack, embedded_pids: dict[str, int | None]) -> None:
        assert stack.process is not None
        self.roots = [stack.process.pid, *(pid for pid in embedded_pids.values() if pid)]
        self.machine = psutil.cpu_times()
        self.started = time.monotonic()
        self.before = self._ours()
        own = psutil.Process().cpu_times()
        self.reaped_before = own.children_user + own.children_system

    def _ours(self) -> dict[int, float]:
        seen: dict[int, float] = {}
        for pid in self.roots:
            try:
                root = psutil.Process(pid)
                for process in [root, *root.children(recursive=True)]:
                    times = process.cpu_times()
                    seen[process.pid] = times.user + times.system
            except psutil.NoSuchProcess:
                continue
        return seen

    def finish(self) -> dict[str, float]:
        after = self._ours()
        machine = psutil.cpu_times()
        wall = time.monotonic() - self.started
        busy = sum(machine) - machine.idle - machine.iowait
        busy -= sum(self.machine) - self.machine.idle - self.machine.iowait
        ours = sum(v - self.before.get(pid, 0.0) for pid, v in after.items())
        # Locust has exited: its CPU is in the kernel's count of this process's reaped children.
        own = psutil.Process().cpu_times()
        ours += own.children_user + own.children_system - self.reaped_before
        cores = psutil.cpu_count() or 1
        return {
            "cores": cores,
            "busy_cores": round(busy / wall, 2),
            "this_soak_cores": round(ours / wall, 2),
            "others_cores": round(max(0.0, busy - ours) / wall, 2),
        }


def _report(  # noqa: PLR0917 - the run's parts, once
    out: Path, web_log: list[str], sampler: Sampler, facts: Any,
    users: dict[str, int], elapsed: float, warmup: float, load_before: tuple[float, ...],
    shares: dict[str, float],
) -> dict[str, Any]:  # fmt: skip
    rows = report.locust_rows(out / "locust_stats.csv")
    written = json.loads((out / "tally.json").read_text()) if (out / "tally.json").exists() else {}
    tally, first_seen = written.get("counts", {}), written.get("first_seen", {})
    total = next((r for r in rows if r["name"] == "Aggregated"), None)
    errors = report.server_errors(tally, web_log)
    statuses = {
        k: v
        for k, v in tally.items()
        if k.startswith("http ") and not k.endswith((" 200", " 202", " 302"))
    }
    return {
        "command": "python -m bench.soak " + " ".join(sys.argv[1:]),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "seconds": elapsed,
        "users": users,
        "requests_per_second": total["rps"] if total else 0.0,
        "requests": rows,
        "server_errors": errors,
        "server_error_count": report.server_error_count(errors),
        "statuses": statuses,
        "websockets": {k: v for k, v in tally.items() if k.startswith("ws ")},
        "runs": {k: v for k, v in tally.items() if k.startswith("run ")},
        "pool_replacements": report.pool_replacements(
            web_log, sampler.samples[-1] if sampler.samples else None
        ),
        "rss": report.rss_growth(sampler.samples, warmup=warmup, first_seen=first_seen),
        "connections": report.connection_series(sampler.samples),
        "machine": {
            **facts.as_dict(),
            **shares,
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
            "describe": f"{facts.describe()}; cores {shares['cores']}, busy "
            f"{shares['busy_cores']} of them over the soak ({shares['this_soak_cores']} this "
            f"soak's processes, {shares['others_cores']} other work); load average "
            f"{load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after",
        },
    }


if __name__ == "__main__":
    main()
