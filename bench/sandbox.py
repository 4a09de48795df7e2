"""execute_python's sandbox (tools/sandbox/): what a script costs, start-up and a typical one.

    .venv/bin/python -m bench.sandbox [--runs 100]

Three series of ``--runs`` each, interleaved so they see the same load: the bare interpreter
(``python -I -c pass``, no sandbox: the machine fact), the sandbox around an empty script (its
start-up: bwrap, namespaces, mounts, the runner), and a typical analysis script (pandas reads a
10,000-row CSV, groups it, draws a bar chart; the table and the PNG come back). Per series: wall
p50/p95, the script's CPU seconds as the sandbox reports them, and the calling process's own CPU
per run (what a worker pays). Prints the machine's cores, load average, kernel, bubblewrap's and
Python's versions from the same run. No database, no Django settings.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tools.sandbox.base import SandboxRequest
from tools.sandbox.bubblewrap import BubblewrapExecutor

TYPICAL = """
import pandas as pd
import matplotlib.pyplot as plt

df = pd.read_csv("/data/sales.csv")
totals = df.groupby("region", as_index=False)["amount"].sum().sort_values("amount")
totals.plot.bar(x="region", y="amount", title="Sales by region")
print(len(df), "rows")
result = totals
"""


def _percentiles(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"p50 {statistics.median(ordered) * 1000:7.1f} ms  p95 {p95 * 1000:7.1f} ms"


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    args = parser.parse_args()
    executor = BubblewrapExecutor()
    reason = executor.unavailable()
    if reason:
        sys.exit(f"no sandbox: {reason}")
    bwrap_version = subprocess.run(
        ["bwrap", "--version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    with tempfile.TemporaryDirectory() as folder:
        csv = Path(folder) / "sales.csv"
        rng = random.Random(7)
        rows = ["region,month,amount"] + [
            f"{rng.choice('NSEW')},{rng.randint(1, 12)},{rng.random() * 100:.2f}"
            for _ in range(10_000)
        ]
        csv.write_text("\n".join(rows) + "\n")
        empty = SandboxRequest(code="pass")
        typical = SandboxRequest(code=TYPICAL, files={"sales.csv": csv})
        walls: dict[str, list[float]] = {"bare": [], "empty": [], "typical": []}
        script_cpu: dict[str, list[float]] = {"empty": [], "typical": []}
        caller_cpu: dict[str, list[float]] = {"bare": [], "empty": [], "typical": []}
        load_before = os.getloadavg()
        for _ in range(args.runs):
            for name in ("bare", "empty", "typical"):
                cpu0, started = _own_cpu(), time.perf_counter()
                if name == "bare":
                    subprocess.run([sys.executable, "-I", "-c", "pass"], check=True)
                else:
                    result = executor.run(empty if name == "empty" else typical)
                    if not result.ok:
                        sys.exit(f"{name} failed: {result.status} {result.error} {result.stderr}")
                    script_cpu[name].append(result.cpu_seconds)
                walls[name].append(time.perf_counter() - started)
                caller_cpu[name].append(_own_cpu() - cpu0)
        load_after = os.getloadavg()
    print(
        f"machine: {os.cpu_count()} cores, load average (1/5/15 min) before "
        f"{'/'.join(f'{v:.1f}' for v in load_before)}, after "
        f"{'/'.join(f'{v:.1f}' for v in load_after)}; Linux {platform.release()}; "
        f"{bwrap_version}; Python {platform.python_version()}"
    )
    print(f"{args.runs} runs of each, interleaved")
    labels = {
        "bare": "bare interpreter (python -I -c pass)",
        "empty": "sandbox, empty script (start-up)",
        "typical": "sandbox, typical pandas + chart script",
    }
    for name, label in labels.items():
        line = f"{label:40} wall {_percentiles(walls[name])}"
        if name in script_cpu:
            line += f"  script CPU p50 {statistics.median(script_cpu[name]) * 1000:6.1f} ms"
        line += f"  caller CPU p50 {statistics.median(caller_cpu[name]) * 1000:5.1f} ms"
        print(line)


if __name__ == "__main__":
    main()
