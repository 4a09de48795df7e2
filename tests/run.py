"""`make pytest`: ``python -m tests.run WORKERS [pytest arguments]``.

The suite runs on WORKERS pytest-xdist processes, on the embedded PostgreSQL and Redis they
share. At the same time the tests marked serial (they stop or kill PostgreSQL or Redis) run in a
process of their own on embedded servers of their own (``.data/serial``): never beside a test
whose servers they take down, and not after the rest either (they mostly wait for a server to go
down and come back). Their report follows the other's. The arguments go to both runs (a ``-m``
only to the first: the tests marked serial it selects are skipped there); a run left with no
test (``-k``, or paths of one kind only) counts as passed, unless both are.

WORKERS 0: one plain pytest run, without xdist, serial tests included.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SERIAL_DATA = ROOT / ".data" / "serial"


def main(argv: list[str]) -> int:
    workers, args = int(argv[0]), argv[1:]
    command = [sys.executable, "-m", "pytest"]
    # Ctrl-C reaches the pytest runs too (one process group): this process waits while they
    # tear their fixtures down (workers, servers) instead of killing them. A handler, not
    # SIG_IGN: the runs would inherit that.
    signal.signal(signal.SIGINT, lambda *_: None)
    if workers == 0:
        return subprocess.Popen([*command, *args], cwd=ROOT).wait()
    with tempfile.TemporaryFile() as log:
        serial = subprocess.Popen(
            [*command, *args, "-m", "serial", "-n", "0"],
            cwd=ROOT,
            env={**os.environ, "AGENTDESK_DATA_DIR": str(SERIAL_DATA)},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        parallel = subprocess.Popen(
            # The slowest tests' durations in every report: what the suite's time goes to.
            [*command, "-n", str(workers), "-m", "not serial", "--durations=25", *args],
            cwd=ROOT,
        ).wait()
        serial_status = serial.wait()
        log.seek(0)
        sys.stdout.write(f"\n--- the tests marked serial, on their own servers ({SERIAL_DATA}):\n")
        sys.stdout.flush()
        sys.stdout.buffer.write(log.read())
        sys.stdout.flush()
    if parallel == serial_status == pytest.ExitCode.NO_TESTS_COLLECTED:
        return parallel
    passed = (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED)
    failed = [s for s in (parallel, serial_status) if s not in passed]
    return failed[0] if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
