"""`manage.py embedded {status,start,stop,restart}` on a private data folder: a status starts
nothing, and a server started again comes back at the same address with its data.

Never on this test run's own servers: every call runs with AGENTDESK_DATA_DIR set to a temporary
folder (in a subprocess, or in this process through `_on`, which checks it took effect)."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from io import StringIO
from pathlib import Path

import psycopg
import pytest
import redis
from django.core.management import call_command

from devkit import embedded
from devkit.embedded import pg_server, pgbouncer_server

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(AGENTDESK_DATA_DIR=str(data_dir), DJANGO_SETTINGS_MODULE="config.settings.dev")
    return env


def _manage(data_dir: Path, *args: str) -> str:
    """`manage.py embedded ...` in a subprocess, as an operator runs it: settings loading too."""
    done = subprocess.run(
        [sys.executable, "manage.py", "embedded", *args],
        cwd=ROOT,
        env=_env(data_dir),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@contextmanager
def _on(data_dir: Path) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AGENTDESK_DATA_DIR", str(data_dir))
        assert embedded.data_dir() == data_dir.resolve()
        yield


def _command(data_dir: Path, *args: str) -> str:
    """The same command in this process (no settings to load: quicker)."""
    out = StringIO()
    with _on(data_dir):
        call_command("embedded", *args, stdout=out)
    return out.getvalue()


def _snapshot(data_dir: Path) -> dict[str, tuple[int, int]]:
    """Size and mtime of every file of the data folder a start would write or append to."""
    files = [
        data_dir / "redis" / "port",
        data_dir / "redis" / "redis.log",
        data_dir / "pg" / pg_server.PG_ENDPOINT_FILE,
        data_dir / "pg" / "log",
        data_dir / "pg" / "postmaster.opts",
    ]
    return {str(f): (f.stat().st_size, f.stat().st_mtime_ns) for f in files}


@pytest.fixture(scope="module")
def data_dir() -> Iterator[Path]:
    """A data folder whose servers were started once by `embedded start` (initdb included).

    Not under pytest's tmp_path: PostgreSQL runs as another user when tests run as root, and
    every pytest session (another one may start meanwhile) makes /tmp/pytest-of-<user> private.
    """
    folder = Path(tempfile.mkdtemp(prefix="agentdesk-embedded-")) / "data"
    try:
        out = _manage(folder, "start")
        assert "postgres: running (pid" in out, out
        assert "redis: running (pid" in out, out
        yield folder
    finally:
        with _on(folder):
            embedded.stop()
        shutil.rmtree(folder.parent, ignore_errors=True)


def test_status_of_a_fresh_data_folder_starts_and_creates_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    out = _manage(folder, "status")
    assert out.splitlines() == [
        f"postgres: stopped (never started)  [{folder}]",
        f"redis: stopped (never started)  [{folder}]",
    ]
    assert not folder.exists()


def test_start_then_status_shows_both_running_and_start_again_changes_nothing(
    data_dir: Path,
) -> None:
    _command(data_dir, "start")
    with _on(data_dir):
        pids = embedded.running_pids()
        located = embedded.locate()
    assert pids["postgres"]
    assert pids["redis"]
    out = _command(data_dir, "status")
    assert out.splitlines() == [
        f"postgres: running (pid {pids['postgres']}) at {data_dir}/pg/.s.PGSQL.5432  [{data_dir}]",
        f"redis: running (pid {pids['redis']}) at 127.0.0.1:{located.redis_port}  [{data_dir}]",
    ]
    assert _command(data_dir, "start") == out
    with _on(data_dir):
        assert embedded.running_pids() == pids


def test_status_and_stop_of_stopped_servers_start_nothing(data_dir: Path) -> None:
    _command(data_dir, "stop")
    with _on(data_dir):
        assert embedded.running_pids() == {"postgres": None, "redis": None}
        located = embedded.locate()
    before = _snapshot(data_dir)

    out = _manage(data_dir, "status")  # settings are loaded: they must not start anything

    assert out.splitlines() == [
        f"postgres: stopped (starts again at {data_dir}/pg/.s.PGSQL.5432)  [{data_dir}]",
        f"redis: stopped (starts again at 127.0.0.1:{located.redis_port})  [{data_dir}]",
    ]
    assert _command(data_dir, "stop", "postgres").startswith("postgres: stopped")
    with _on(data_dir):
        assert embedded.running_pids() == {"postgres": None, "redis": None}
    assert _snapshot(data_dir) == before
    assert not embedded.port_open(located.redis_port)


def test_restart_redis_keeps_its_port_and_data_and_a_connected_client_works_again(
    data_dir: Path,
) -> None:
    _command(data_dir, "start", "redis")
    with _on(data_dir):
        before = embedded.locate()
    client = redis.Redis.from_url(before.redis_url)
    try:
        client.set("embedded-test", "kept")
        assert client.get("embedded-test") == b"kept"

        out = _command(data_dir, "restart", "redis")

        with _on(data_dir):
            after = embedded.locate()
        assert out.splitlines() == [
            f"redis: running (pid {after.redis_pid}) at 127.0.0.1:{before.redis_port}  [{data_dir}]"
        ]
        assert after.redis_pid != before.redis_pid
        assert after.redis_url == before.redis_url
        # The client made before the restart reconnects by itself (redis-py retries).
        assert client.get("embedded-test") == b"kept"  # saved on SIGTERM, loaded on start
    finally:
        client.close()


def test_a_saved_redis_port_taken_by_another_process_moves_loudly(
    data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _command(data_dir, "stop", "redis")
    with _on(data_dir):
        saved = embedded.locate().redis_port
    with socket.socket() as squatter:
        # SO_REUSEADDR as Redis does: the stopped server's connections may be in TIME_WAIT.
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", saved))
        squatter.listen()
        with caplog.at_level(logging.WARNING, logger="devkit.embedded"):
            out = _command(data_dir, "start", "redis")
        with _on(data_dir):
            moved = embedded.locate().redis_port
    try:
        assert moved != saved
        assert out.startswith("redis: running (pid ")
        assert f"127.0.0.1:{moved}" in out
        assert f"saved port {saved} is in use" in caplog.text
        assert f"saved port {saved} is in use" in (data_dir / "redis" / "redis.log").read_text()
        # The new port is the saved one from now on.
        out = _command(data_dir, "restart", "redis")
        assert f"127.0.0.1:{moved}" in out
    finally:
        _command(data_dir, "restart", "redis")


def test_stop_then_start_postgres_keeps_its_address_and_data(data_dir: Path) -> None:
    _command(data_dir, "start", "postgres")
    with _on(data_dir):
        before = embedded.locate()
    url = before.database_url(embedded.SUPERUSER_ROLE, "postgres")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS embedded_test")
        conn.execute("CREATE TABLE embedded_test (note text)")
        conn.execute("INSERT INTO embedded_test VALUES ('written before the stop')")
    connected_before = psycopg.connect(url, autocommit=True)
    try:
        assert _command(data_dir, "stop", "postgres").startswith("postgres: stopped (starts")
        with pytest.raises(psycopg.OperationalError):
            connected_before.execute("SELECT 1")

        out = _command(data_dir, "start", "postgres")

        with _on(data_dir):
            after = embedded.locate()
        assert out.splitlines() == [
            f"postgres: running (pid {after.postgres_pid}) at "
            f"{data_dir}/pg/.s.PGSQL.5432  [{data_dir}]"
        ]
        assert after.postgres_pid != before.postgres_pid
        assert after.database_url(embedded.SUPERUSER_ROLE, "postgres") == url
        with psycopg.connect(url) as conn:  # the URL a process resolved before the stop
            rows = conn.execute("SELECT note FROM embedded_test").fetchall()
        assert rows == [("written before the stop",)]
        opts = (data_dir / "pg" / "postmaster.opts").read_text()
        assert '"-h" ""' in opts  # still no TCP listener
    finally:
        connected_before.close()


def test_a_saved_postgres_socket_taken_by_another_server_moves_loudly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pgdata = tmp_path / "pg"
    pgdata.mkdir()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as other:
        other.bind(str(pgdata / ".s.PGSQL.5432"))
        other.listen()
        with caplog.at_level(logging.WARNING, logger="devkit.embedded"):
            port = pg_server._free_socket_port(pgdata, str(pgdata), 5432)
    assert port == 5433
    assert f"socket {pgdata}/.s.PGSQL.5432 is in use by another server" in caplog.text
    assert pg_server._postgres_endpoint(pgdata) == (str(pgdata), 5433)


@pytest.mark.skipif(pgbouncer_server.binary() is None, reason="pgbouncer is not installed")
def test_pgbouncer_starts_in_front_of_postgres_when_named_and_stops(data_dir: Path) -> None:
    """`embedded start pgbouncer`: transaction pooling at loopback for the runtime role; once
    started, `status` (all) shows it; `stop pgbouncer` stops it alone."""
    out = _command(data_dir, "start", "pgbouncer")
    with _on(data_dir):
        located = embedded.locate()
    pid = pgbouncer_server.pid(data_dir / embedded.PGBOUNCER)
    address = f"127.0.0.1:{located.pgbouncer_port}"
    assert out.splitlines() == [f"pgbouncer: running (pid {pid}) at {address}  [{data_dir}]"]
    with psycopg.connect(located.pooled_database_url(embedded.RUNTIME_ROLE)) as conn:
        assert conn.execute("SELECT current_user").fetchone() == (embedded.RUNTIME_ROLE,)
    assert "pool_mode = transaction" in (data_dir / "pgbouncer" / "pgbouncer.ini").read_text()
    assert f"pgbouncer: running (pid {pid})" in _command(data_dir, "status")
    assert _command(data_dir, "stop", "pgbouncer").splitlines() == [
        f"pgbouncer: stopped (starts again at {address})  [{data_dir}]"
    ]
    with _on(data_dir):
        assert embedded.running_pids()["postgres"] == located.postgres_pid
