"""What the soak samples every few seconds while it runs: the database connections of each
process of the stack by state (PostgreSQL's view, each backend matched to the process at the
other end of its unix socket), the pool series the platform's ``/metrics`` serves, and the
processes' resident memory."""

from __future__ import annotations

import re
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx
import psutil
import psycopg

POOL_SERIES = re.compile(r"^(agentdesk_[a-z_]*pool[a-z_]*)(\{[^}]*\})? ([0-9.e+-]+)$", re.M)


def backend_clients(socket_path: str) -> dict[int, int]:
    """PostgreSQL backend pid -> pid of the client process, for connections through the unix
    socket at ``socket_path`` (``ss``: each end's inode and its peer's)."""
    listing = subprocess.run(["ss", "-xpnH"], capture_output=True, text=True, check=False).stdout
    owner: dict[str, int] = {}
    backends: list[tuple[int, str]] = []
    for line in listing.splitlines():
        parts = line.split()
        found = re.search(r"pid=(\d+)", line)
        if len(parts) < 8 or found is None:
            continue
        local_path, local_inode, peer_inode = parts[4], parts[5], parts[7]
        owner[local_inode] = int(found.group(1))
        if local_path == socket_path:
            backends.append((int(found.group(1)), peer_inode))
    return {backend: owner[peer] for backend, peer in backends if peer in owner}


@dataclass
class Sample:
    at: float  # seconds since the soak started
    wall: float  # Unix time
    connections: dict[str, Counter[str]]  # process group -> state -> backends
    pool: dict[str, float]  # /metrics pool series -> value
    rss_mb: dict[str, float]


@dataclass
class Sampler:
    """Samples in a thread every ``every`` seconds until :meth:`stop`."""

    admin_url: str  # a superuser's: every session's state is visible
    socket_path: str
    groups: dict[str, int]  # name -> root pid (its children count with it)
    metrics_url: str
    every: float = 5.0
    samples: list[Sample] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _started: float = 0.0

    def start(self) -> Sampler:
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="soak-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)

    def _run(self) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            while True:
                self.samples.append(self.sample(conn))
                if self._stop.wait(self.every):
                    self.samples.append(self.sample(conn))  # the end's
                    return

    def _group_of(self) -> dict[int, str]:
        members: dict[int, str] = {}
        for name, pid in self.groups.items():
            try:
                root = psutil.Process(pid)
                for process in [root, *root.children(recursive=True)]:
                    members.setdefault(process.pid, name)
            except psutil.NoSuchProcess:
                continue
        return members

    def sample(self, conn: psycopg.Connection[Any]) -> Sample:
        clients = backend_clients(self.socket_path)
        members = self._group_of()
        rows = conn.execute(
            "SELECT pid, coalesce(state, '?') FROM pg_stat_activity"
            " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
        ).fetchall()
        connections: dict[str, Counter[str]] = {}
        for backend, state in rows:
            group = members.get(clients.get(backend, -1), "other")
            connections.setdefault(group, Counter())[state] += 1
        return Sample(
            at=round(time.monotonic() - self._started, 1),
            wall=time.time(),
            connections=connections,
            pool=self._pool_series(),
            rss_mb=rss_mb(self.groups),
        )

    def _pool_series(self) -> dict[str, float]:
        try:
            text = httpx.get(self.metrics_url, timeout=5).text
        except httpx.HTTPError:
            return {}
        found = POOL_SERIES.findall(text)
        return {name + (labels or ""): float(value) for name, labels, value in found}


def rss_mb(groups: dict[str, int]) -> dict[str, float]:
    """Resident memory of each named process alone (not its children), in MB."""
    sizes = {}
    for name, pid in groups.items():
        try:
            sizes[name] = round(psutil.Process(pid).memory_info().rss / 2**20, 1)
        except psutil.NoSuchProcess:
            sizes[name] = float("nan")
    return sizes
