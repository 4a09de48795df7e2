"""What both embedded servers' daemons need: a process stopped (a zombie counts as stopped), a
file written whole (readers without the lock never see half of it), a warning in the server's own
log too, the end of a log for an error message, a started daemon waited for."""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from devkit.embedded.ports import port_open

logger = logging.getLogger(__name__)


def _kill(pid: int, sig: signal.Signals = signal.SIGTERM, timeout: float = 10.0) -> None:
    try:
        proc = psutil.Process(pid)
        proc.send_signal(sig)
        deadline = time.monotonic() + timeout
        # A daemon's parent is init, which may reap it only seconds later: a zombie has exited
        # (its port is free), so it counts as stopped.
        while proc.status() != psutil.STATUS_ZOMBIE:
            if time.monotonic() > deadline:
                proc.kill()
                return
            time.sleep(0.01)
    except psutil.NoSuchProcess:
        return


def _write_atomic(path: Path, text: str) -> None:
    """Readers without the lock (``locate``) never see a half-written file."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.write_text(text)
    temporary.replace(path)


def _warn_moved(log: Path, message: str) -> None:
    logger.warning("%s", message)
    try:
        with log.open("a") as file:
            file.write(f"\n!!! {message}\n")
    except OSError:
        pass


def _tail(path: Path, size: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-size:]
    except OSError:
        return ""


def _await_listening(
    pid_of: Callable[[], int | None], port: int, *, name: str, log: Path, timeout: float = 10.0
) -> int:
    """The pid of a daemon just started, once its pid file names it and ``port`` answers; a
    RuntimeError with the end of its ``log`` if it does not within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = pid_of()
        if found is not None and port_open(port):
            return found
        time.sleep(0.02)
    raise RuntimeError(f"{name} did not start on port {port}:\n{_tail(log)}")
