"""Machine facts every benchmark report prints from the same run: they drift on shared machines,
so results are stated as ratios to them (bench/README.md)."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import psycopg


@dataclass(frozen=True)
class MachineFacts:
    round_trip_ms: float  # p50 of `SELECT 1` on an open connection
    commit_ms: float  # p50 of one durable (WAL-flushed) single-row INSERT + COMMIT

    def describe(self) -> str:
        return (
            f"PostgreSQL round trip (SELECT 1) p50 {self.round_trip_ms:.3f} ms; "
            f"durable commit p50 {self.commit_ms:.3f} ms"
        )

    def as_dict(self) -> dict[str, float]:
        return {"round_trip_ms": self.round_trip_ms, "commit_ms": self.commit_ms}


def measure(owner_conninfo: str, *, samples: int = 300) -> MachineFacts:
    """Measure with the owner role: a durable commit needs a WAL-logged table it may create
    (temporary tables skip the WAL, so their commits are not flushed)."""
    with psycopg.connect(owner_conninfo, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = on")
        round_trips = []
        for _ in range(samples):
            started = time.perf_counter()
            conn.execute("SELECT 1").fetchone()
            round_trips.append((time.perf_counter() - started) * 1000)
        conn.execute("CREATE TABLE IF NOT EXISTS bench_commit_probe (v int)")
        commits = []
        try:
            for i in range(samples):
                started = time.perf_counter()
                conn.execute("INSERT INTO bench_commit_probe VALUES (%s)", [i])  # autocommit
                commits.append((time.perf_counter() - started) * 1000)
        finally:
            conn.execute("DROP TABLE IF EXISTS bench_commit_probe")
    return MachineFacts(
        round_trip_ms=statistics.median(round_trips), commit_ms=statistics.median(commits)
    )
