"""The embedded servers of a data folder: started once under a file lock (``ensure_running``),
located without starting anything (``locate``, ``status``), stopped and restarted, each at the
address it had before (devkit.embedded). Must not import Django: settings call it."""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from devkit.embedded import pgbouncer_server
from devkit.embedded.pg_server import (
    DATABASE_NAME,
    POSTGRES_DEFAULT_PORT,
    _ensure_postgres,
    _postgres_endpoint,
    _postgres_pid,
    _stop_postgres,
    postgres_url,
)
from devkit.embedded.redis_server import _ensure_redis, _redis_pid, _saved_redis_port, _stop_redis

BASE_DIR = Path(__file__).resolve().parent.parent.parent

SERVICES = ("postgres", "redis")
# Started only when asked (AGENTDESK_EMBEDDED_PGBOUNCER=1, `manage.py embedded start pgbouncer`).
PGBOUNCER = "pgbouncer"


def data_dir() -> Path:
    """The embedded servers' data folder (git-ignored); ``AGENTDESK_DATA_DIR`` moves it."""
    return Path(os.environ.get("AGENTDESK_DATA_DIR") or BASE_DIR / ".data").resolve()


@dataclass(frozen=True)
class EmbeddedServices:
    postgres_socket_dir: str
    postgres_port: int
    postgres_pid: int | None  # None only from locate(): a stopped server
    redis_port: int  # 0 only from locate(): never started
    redis_pid: int | None
    started: bool  # True when this call started at least one server
    pgbouncer_port: int = 0  # 0: never started

    def database_url(self, role: str, database: str = DATABASE_NAME) -> str:
        return postgres_url(self.postgres_socket_dir, self.postgres_port, role, database)

    def pooled_database_url(self, role: str, database: str = DATABASE_NAME) -> str:
        """Through the embedded PgBouncer (transaction pooling), at loopback."""
        return f"postgresql://{role}@127.0.0.1:{self.pgbouncer_port}/{database}"

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{self.redis_port}/0"


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    pid: int | None  # None: stopped
    address: str  # where it listens, or will listen when started; "" before its first start


def ensure_running(services: Collection[str] = SERVICES) -> EmbeddedServices:
    """Start the named embedded servers (default both; "pgbouncer" only when named, after
    PostgreSQL) if they are not running; return where they listen (a server not named is only
    located, not started)."""
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
        pgbouncer_port=pgbouncer_server.saved_port(root / PGBOUNCER) or 0,
    )


def in_use() -> tuple[str, ...]:
    """Both servers, and the PgBouncer when this data folder ever started one: what `manage.py
    embedded ... all` acts on."""
    started = (data_dir() / PGBOUNCER).exists()
    return (*SERVICES, PGBOUNCER) if started else SERVICES


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
    if PGBOUNCER in services:
        folder = root / PGBOUNCER
        port = pgbouncer_server.saved_port(folder)
        address = f"127.0.0.1:{port}" if port else ""
        found.append(ServiceStatus(PGBOUNCER, pgbouncer_server.pid(folder), address))
    return found


def running_pids() -> dict[str, int | None]:
    """The pids of the embedded servers of the current data folder, ``None`` for a stopped one."""
    root = data_dir()
    return {"postgres": _postgres_pid(root / "pg"), "redis": _redis_pid(root / "redis")}


def stop(services: Collection[str] | None = None) -> None:
    """Stop the named embedded servers (default: :func:`in_use`) of the current data folder;
    PostgreSQL with a fast shutdown. A stopped one is left alone."""
    services = in_use() if services is None else services
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
    unknown = set(services) - {*SERVICES, PGBOUNCER}
    if unknown:
        raise ValueError(f"unknown embedded service(s): {sorted(unknown)}")


def _lock(root: Path) -> FileLock:
    return FileLock(str(root / ".lock"), timeout=120)


def _start(root: Path, services: Collection[str]) -> EmbeddedServices:
    pg_started = "postgres" in services and _ensure_postgres(root / "pg")
    redis_started = "redis" in services and _ensure_redis(root / "redis")
    bouncer_started = False
    if PGBOUNCER in services:
        pg_started = _ensure_postgres(root / "pg") or pg_started  # it needs PostgreSQL
        endpoint = _postgres_endpoint(root / "pg")
        assert endpoint is not None  # saved by the start
        bouncer_started = pgbouncer_server._ensure_pgbouncer(root / PGBOUNCER, *endpoint)
    located = _locate(root)
    return EmbeddedServices(
        postgres_socket_dir=located.postgres_socket_dir,
        postgres_port=located.postgres_port,
        postgres_pid=located.postgres_pid,
        redis_port=located.redis_port,
        redis_pid=located.redis_pid,
        started=pg_started or redis_started or bouncer_started,
        pgbouncer_port=located.pgbouncer_port,
    )


def _stop(root: Path, services: Collection[str]) -> None:
    if PGBOUNCER in services:
        pgbouncer_server.stop(root / PGBOUNCER)
    # Redis first: a worker that loses its broker stops taking runs before the database goes.
    if "redis" in services:
        _stop_redis(root / "redis")
    if "postgres" in services:
        _stop_postgres(root / "pg")
