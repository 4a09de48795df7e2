"""`make run` stops for good on Ctrl-C or SIGTERM, however the signals land (issue 25, item 11).

A terminal's Ctrl-C and a supervisor's SIGTERM reach the whole foreground process group: make
and `manage.py up` alike, and make passes a SIGTERM on to `up` once more. Each test starts `up`
(through the real `make run`, or with a terminal of its own) in a process group of its own, on a
data folder of its own and a free port, waits until the web server answers, signals it, and
checks that it exits and that every process it started (web, worker, beat, the embedded
PostgreSQL and Redis) is gone. A stuck `up` is sent SIGABRT: the failure shows its threads'
stacks.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from unittest import mock

import httpx
import psutil
import pytest

from devkit import embedded

ROOT = Path(__file__).resolve().parents[2]
STAMP = ".venv/.installed-stamp"
# Starts per way of signalling (one in the suite: nine starts took 7 min of a 2-core CI run);
# AGENTDESK_UP_SIGNAL_ROUNDS=10 repeats each ten times, to hunt a race.
ROUNDS = int(os.environ.get("AGENTDESK_UP_SIGNAL_ROUNDS", "1"))
# `up` gives its children 15 s to stop, then stops the embedded servers: ample on a loaded machine.
STOP_DEADLINE_S = 90
# `up` on a terminal that is slow to show the report of the first signal, as a busy terminal is:
# the second signal (make's, sent on a fraction of a millisecond later) lands while it is written.
SLOW_TERMINAL = """
import os, signal, sys
import django
django.setup()
from django.core.management import call_command

class Terminal:
    def write(self, text):
        if "received SIGINT" in text:
            os.kill(os.getpid(), signal.SIGTERM)
        return sys.stdout.write(text)

    def flush(self):
        sys.stdout.flush()

    def isatty(self):
        return False

call_command("up", *sys.argv[1:], stdout=Terminal())
"""
pytestmark = pytest.mark.slow


def _env(data_dir: Path) -> dict[str, str]:
    # As a developer's shell has it: no servers named, and no outer make's flags (`make test`
    # runs this test under make; its jobserver is not the inner make's).
    dropped = {"DATABASE_URL", "DATABASE_OWNER_URL", "REDIS_URL"}
    dropped |= {"MAKEFLAGS", "MFLAGS", "MAKELEVEL"}
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update(
        AGENTDESK_DATA_DIR=str(data_dir),
        DJANGO_SETTINGS_MODULE="config.settings.dev",
        PYTHONFAULTHANDLER="1",  # SIGABRT prints every thread's stack
        PYTHONUNBUFFERED="1",
    )
    return env


@pytest.fixture(scope="module")
def data_dir() -> Iterator[Path]:
    """One for the module: the first `up` creates the database and migrates it, the others
    start its servers again (each `up` stops those it started).

    Not under pytest's tmp_path: PostgreSQL runs as another user when tests run as root, and
    every pytest session (another one may start meanwhile) makes /tmp/pytest-of-<user> private.
    """
    folder = Path(tempfile.mkdtemp(prefix="agentdesk-up-signals-")) / "data"
    yield folder
    try:
        _stop_servers(folder)
    finally:
        shutil.rmtree(folder.parent, ignore_errors=True)


def _start(argv: list[str], data_dir: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            argv, cwd=ROOT, env=_env(data_dir), stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip


def _make_run(data_dir: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    # -o: the venv running this test is the one `run` would build; a pyproject edited meanwhile
    # must not make the test reinstall it.
    argv = ["make", "--no-print-directory", "-o", STAMP, "run"]
    return _start([*argv, f"ARGS=--port {port} --concurrency 2"], data_dir, log)


def _listens(leader: subprocess.Popen[bytes], port: int) -> bool:
    """One of the processes ``leader`` started listens on ``port`` (not a stranger that took
    the free port meanwhile: another test's server answered once before this one started)."""
    for process in psutil.Process(leader.pid).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if any(c.laddr.port == port for c in process.net_connections("tcp")):
                return True
    return False


def _wait_until_web_answers(leader: subprocess.Popen[bytes], port: int, log: Path) -> None:
    # A first start creates and migrates the database: minutes on a loaded machine.
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        assert leader.poll() is None, f"it exited early:\n{log.read_text()[-3000:]}"
        try:
            if _listens(leader, port):
                httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)  # any answer
                return
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"the web server never answered:\n{log.read_text()[-3000:]}")


def _started(leader: subprocess.Popen[bytes], data_dir: Path) -> list[psutil.Process]:
    found = [psutil.Process(leader.pid), *psutil.Process(leader.pid).children(recursive=True)]
    with _on(data_dir):
        pids = [pid for pid in embedded.running_pids().values() if pid]
    names = " ".join(_describe(p) for p in found)
    for expected in ("uvicorn", "worker", "beat"):
        assert expected in names, names
    assert len(pids) == 2, "the embedded PostgreSQL and Redis"
    return found + [psutil.Process(pid) for pid in pids]


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _describe(process: psutil.Process) -> str:
    try:
        return f"{process.pid} {' '.join(process.cmdline())[:120]}"
    except psutil.Error:
        return str(process.pid)


def _is_up(process: psutil.Process) -> bool:
    return any("manage.py" in part or "call_command" in part for part in process.cmdline())


def _stops_everything(
    leader: subprocess.Popen[bytes], started: list[psutil.Process], log: Path, what: str
) -> None:
    try:
        leader.wait(STOP_DEADLINE_S)
    except subprocess.TimeoutExpired:
        for process in started:
            if _alive(process) and _is_up(process):
                process.send_signal(signal.SIGABRT)
                with contextlib.suppress(psutil.TimeoutExpired):
                    process.wait(30)
        pytest.fail(f"still running {STOP_DEADLINE_S} s after {what}:\n{log.read_text()[-8000:]}")
    left = [_describe(p) for p in started if _alive(p)]
    assert left == [], f"{what}: {left}\n{log.read_text()[-3000:]}"
    assert "    up | stopped" in log.read_text()


def _clean_up(
    leader: subprocess.Popen[bytes], started: list[psutil.Process], data_dir: Path
) -> None:
    """After a failure: what `up` left is killed, the embedded servers stopped (the next test
    starts them again through `up`, which stops only the servers it started)."""
    if leader.poll() is None:
        os.killpg(leader.pid, signal.SIGKILL)
        leader.wait()
    for process in started:
        if _alive(process) and process.name() not in {"postgres", "redis-server"}:
            process.kill()
    _stop_servers(data_dir)


def _stop_servers(data_dir: Path) -> None:
    with _on(data_dir):
        embedded.stop()


def _on(data_dir: Path) -> contextlib.AbstractContextManager[object]:
    # This test run's own folder (AGENTDESK_DATA_DIR, if set) is back afterwards: the run's
    # database teardown reads it.
    return mock.patch.dict(os.environ, {"AGENTDESK_DATA_DIR": str(data_dir)})


def _ctrl_c(make: subprocess.Popen[bytes]) -> None:
    os.killpg(make.pid, signal.SIGINT)


def _ctrl_c_twice(make: subprocess.Popen[bytes]) -> None:
    os.killpg(make.pid, signal.SIGINT)
    os.killpg(make.pid, signal.SIGINT)


def _sigterm(make: subprocess.Popen[bytes]) -> None:
    os.killpg(make.pid, signal.SIGTERM)  # make passes it on: `up` receives two


def _a_stream_of_both(make: subprocess.Popen[bytes]) -> None:
    # For a quarter of a second: whenever `up` handles one, others land while it does (a burst
    # sent at once would mostly arrive as one).
    deadline = time.monotonic() + 0.25
    while time.monotonic() < deadline:
        os.killpg(make.pid, signal.SIGINT)
        os.killpg(make.pid, signal.SIGTERM)


SIGNALLING: dict[str, Callable[[subprocess.Popen[bytes]], None]] = {
    "ctrl-c": _ctrl_c,
    "ctrl-c-twice": _ctrl_c_twice,
    "sigterm": _sigterm,
    "a-stream-of-both": _a_stream_of_both,
}


@pytest.mark.parametrize("how", list(SIGNALLING))
def test_make_run_stops_every_process_it_started_on_its_groups_signals(
    data_dir: Path, tmp_path: Path, how: str
) -> None:
    for round_ in range(1, ROUNDS + 1):
        port = embedded.free_port()
        log = tmp_path / f"make-run-{round_}.log"
        make = _make_run(data_dir, port, log)
        started: list[psutil.Process] = []
        try:
            _wait_until_web_answers(make, port, log)
            started = _started(make, data_dir)
            SIGNALLING[how](make)
            _stops_everything(make, started, log, f"{how} (round {round_})")
        finally:
            _clean_up(make, started, data_dir)


def test_up_stops_when_a_second_signal_lands_while_it_reports_the_first(
    data_dir: Path, tmp_path: Path
) -> None:
    port = embedded.free_port()
    log = tmp_path / "up.log"
    argv = [sys.executable, "-c", SLOW_TERMINAL, "--port", str(port), "--concurrency", "2"]
    up = _start(argv, data_dir, log)
    started: list[psutil.Process] = []
    try:
        _wait_until_web_answers(up, port, log)
        started = _started(up, data_dir)
        up.send_signal(signal.SIGINT)
        _stops_everything(up, started, log, "SIGINT, then SIGTERM while it said so")
        assert "    up | received SIGINT, stopping" in log.read_text()
    finally:
        _clean_up(up, started, data_dir)
