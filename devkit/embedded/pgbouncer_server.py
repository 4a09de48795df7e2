"""The embedded PgBouncer (Debian's ``pgbouncer`` binary) in front of the embedded PostgreSQL, in
transaction pooling mode, as a cluster runs the platform (README "PgBouncer"). Started only when
asked (``AGENTDESK_EMBEDDED_PGBOUNCER=1``, ``manage.py embedded start pgbouncer``): at its saved
port at loopback (TCP only, as a pooler is reached in production), its configuration written at
every start from where PostgreSQL listens, stopped with SIGTERM (devkit.embedded).

The tests start private ones too (:func:`start`, a pool of one server connection: two clients
then share one PostgreSQL session, which makes anything session-bound visible).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
from pathlib import Path

import psutil

from devkit.embedded.daemons import (
    _await_listening,
    _kill,
    _warn_moved,
    _write_atomic,
)
from devkit.embedded.pg_server import OWNER_ROLE, RUNTIME_ROLE, SUPERUSER_ROLE, _pg_system_user
from devkit.embedded.ports import _new_port, _tcp_port_free

CONFIG = "pgbouncer.ini"
# Pool sizes of the embedded one: a test run's worker threads, ASGI server and pytest-xdist
# processes share it; PostgreSQL allows 300 connections (pg_server.POSTGRES_SETTINGS).
DEFAULT_POOL_SIZE = 40
MAX_CLIENT_CONN = 2000


def binary() -> str | None:
    """The ``pgbouncer`` executable (Debian installs it in /usr/sbin), or None."""
    return shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin:/usr/local/sbin")


def config_text(
    folder: Path, *, port: int, pg_socket_dir: str, pg_port: int, pool_size: int
) -> str:
    """pgbouncer.ini: every database (``*``) of the PostgreSQL at ``pg_socket_dir``/``pg_port``,
    transaction pooling, trust (the embedded PostgreSQL trusts local connections too; production
    authenticates: README "PgBouncer")."""
    return "\n".join(
        [
            "[databases]",
            f"* = host={pg_socket_dir} port={pg_port}",
            "[pgbouncer]",
            "pool_mode = transaction",
            "listen_addr = 127.0.0.1",
            f"listen_port = {port}",
            "unix_socket_dir =",
            "auth_type = trust",
            f"auth_file = {folder / 'userlist.txt'}",
            f"stats_users = {SUPERUSER_ROLE}",
            f"default_pool_size = {pool_size}",
            "reserve_pool_size = 0",
            f"max_client_conn = {MAX_CLIENT_CONN}",
            # Not run in transaction mode (nothing session-bound may be left to reset), kept
            # explicit: the same file is right for session mode too.
            "server_reset_query = DISCARD ALL",
            # A database dropped by a test (DROP DATABASE ... WITH (FORCE)) loses its server
            # connections; a client waits at most this for one before it gets an error.
            "query_wait_timeout = 60",
            # A test run opens thousands of client connections: only what goes wrong is logged.
            "log_connections = 0",
            "log_disconnections = 0",
            f"logfile = {folder / 'pgbouncer.log'}",
            f"pidfile = {folder / 'pgbouncer.pid'}",
            "",
        ]
    )


def pid(folder: Path) -> int | None:
    try:
        found = int((folder / "pgbouncer.pid").read_text().strip())
        proc = psutil.Process(found)
        if proc.status() == psutil.STATUS_ZOMBIE or "pgbouncer" not in proc.name():
            return None
    except (FileNotFoundError, ValueError, psutil.NoSuchProcess):
        return None
    return found


def saved_port(folder: Path) -> int | None:
    try:
        return int((folder / "port").read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def start(folder: Path, *, port: int, pg_socket_dir: str, pg_port: int, pool_size: int) -> int:
    """Start a pgbouncer daemon configured in ``folder``; its pid once it accepts connections.

    PgBouncer refuses to run as root: as root it runs as PostgreSQL's own system user."""
    executable = binary()
    if executable is None:
        raise RuntimeError("pgbouncer is not installed (Debian: apt-get install pgbouncer)")
    folder.mkdir(parents=True, exist_ok=True)
    text = config_text(
        folder, port=port, pg_socket_dir=pg_socket_dir, pg_port=pg_port, pool_size=pool_size
    )
    _write_atomic(folder / CONFIG, text)
    roles = (RUNTIME_ROLE, OWNER_ROLE, SUPERUSER_ROLE)
    _write_atomic(folder / "userlist.txt", "".join(f'"{role}" ""\n' for role in roles))
    user = _pg_system_user()
    if user is not None:
        entry = pwd.getpwnam(user)
        for path in (folder, *folder.iterdir()):
            os.chown(path, entry.pw_uid, entry.pw_gid)
    command = [executable, "-d", *(["-u", user] if user else []), str(folder / CONFIG)]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return _await_listening(
        lambda: pid(folder), port, name="pgbouncer", log=folder / "pgbouncer.log"
    )


def stop(folder: Path) -> None:
    found = pid(folder)
    if found is not None:
        _kill(found)  # SIGTERM: closes its connections at once
    with contextlib.suppress(FileNotFoundError):
        (folder / "pgbouncer.pid").unlink()


def _ensure_pgbouncer(folder: Path, pg_socket_dir: str, pg_port: int) -> bool:
    """Start the data folder's pgbouncer if it is not running (at its saved port); a running
    one is told where PostgreSQL is now (reloaded if that changed). Whether this call started
    it."""
    running = pid(folder)
    if running is not None:
        port = saved_port(folder) or 0
        wanted = config_text(
            folder, port=port, pg_socket_dir=pg_socket_dir, pg_port=pg_port,
            pool_size=DEFAULT_POOL_SIZE,
        )  # fmt: skip
        if (folder / CONFIG).read_text() != wanted:
            _write_atomic(folder / CONFIG, wanted)
            os.kill(running, signal.SIGHUP)  # reloads its configuration
        return False
    folder.mkdir(parents=True, exist_ok=True)
    saved = saved_port(folder)
    if saved is not None and _tcp_port_free(saved):
        port = saved
    else:
        port = _new_port()
        if saved is not None:
            _warn_moved(
                folder / "pgbouncer.log",
                f"embedded PgBouncer: the saved port {saved} is in use by another process; "
                f"starting on port {port} instead. Processes that still use it must be restarted.",
            )
        _write_atomic(folder / "port", str(port))
    start(folder, port=port, pg_socket_dir=pg_socket_dir, pg_port=pg_port,
          pool_size=DEFAULT_POOL_SIZE)  # fmt: skip
    return True
