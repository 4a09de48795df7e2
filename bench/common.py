"""Shared set-up of the benchmarks: a private database on the embedded (or configured) servers,
migrated like the test database, a real Celery worker, the fake provider server, and agents."""

from __future__ import annotations

import multiprocessing
import os
import statistics
import time
import uuid
from typing import TYPE_CHECKING, Any

import psutil
import psycopg
from django.conf import settings
from django.core.management import call_command
from psycopg import sql

from bench.machine import MachineFacts, measure
from core import db_roles

if TYPE_CHECKING:
    from agents.models import Execution


def worker(*, concurrency: int, **env: str) -> Any:
    """A real Celery worker subprocess configured as in production, not as the tests configure
    theirs (they turn the catalogue cache off to see edits at once, and use short leases)."""
    from tests.processes import Worker  # noqa: PLC0415

    production = {
        "AGENTDESK_CATALOGUE_CACHE_SECONDS": "30",
        "AGENTDESK_LEASE_SECONDS": "60",
        "AGENTDESK_LLM_TIMEOUT_SECONDS": "60",
        "LOG_LEVEL": "WARNING",
    }
    started = Worker(concurrency=concurrency)
    started.extra_env.update({**production, **env})  # not as keywords: Worker has some of its own
    return started


class FakeServerProcess:
    """The fake provider in a process of its own, so that under load its CPU is not taken from
    (or given to) the process that runs the benchmark. ``responder`` answers every request."""

    def __init__(self, responder: Any, *, latency: float = 0.0) -> None:
        context = multiprocessing.get_context("fork")  # the responder is a closure: inherited
        self._port = context.Value("i", 0)
        self._max_in_flight = context.Value("i", 0)
        self._process = context.Process(target=self._serve, args=(responder, latency), daemon=True)

    def _serve(self, responder: Any, latency: float) -> None:
        from devkit.fake_server import FakeProviderServer  # noqa: PLC0415

        server = FakeProviderServer(latency=latency, record=False)
        server.set_responder(responder)
        track = server.track_in_flight

        def track_and_share(delta: int) -> None:
            track(delta)
            with self._max_in_flight.get_lock():
                self._max_in_flight.value = max(self._max_in_flight.value, server.in_flight)

        server.track_in_flight = track_and_share  # type: ignore[method-assign]
        self._port.value = server.port
        server.serve_forever()

    def __enter__(self) -> FakeServerProcess:
        self._process.start()
        deadline = time.monotonic() + 10
        while not self._port.value and time.monotonic() < deadline:
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self._process.terminate()
        self._process.join(5)

    @property
    def openai_base_url(self) -> str:
        return f"http://127.0.0.1:{self._port.value}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return f"http://127.0.0.1:{self._port.value}"

    @property
    def max_in_flight(self) -> int:
        return int(self._max_in_flight.value)

    def reset_max_in_flight(self) -> None:
        self._max_in_flight.value = 0

    @property
    def pid(self) -> int:
        assert self._process.pid is not None
        return self._process.pid


def _postmaster() -> psutil.Process:
    """The postmaster of the server the benchmark's database is on (a backend's parent)."""
    with psycopg.connect(database_conninfo()) as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        parent = psutil.Process(row[0]).parent()  # while the backend lives
    assert parent is not None, "the database server runs on another machine"
    return parent


class CpuMeter:
    """CPU time (user + system, from the kernel's counters) that groups of processes spend over
    a stretch of a benchmark: where the machine's cores go, per unit of work. ``groups`` names
    process ids (their child processes count with them unless named before); the processes of
    the PostgreSQL server the benchmark uses (its postmaster and every child: backends, WAL
    writer, checkpointer, autovacuum) are one more group, and no other PostgreSQL of the machine
    (a shared machine runs others). A backend that exits inside the stretch is not counted (the
    runtime's pooled connections stay open)."""

    def __init__(self, **groups: list[int]) -> None:
        self.groups = groups
        self.before: dict[str, dict[int, float]] = {}
        self.after: dict[str, dict[int, float]] = {}
        self.seconds = 0.0
        self._postmaster: psutil.Process | None = None

    def _sample(self) -> dict[str, dict[int, float]]:
        # Each process counts once, in the first group that names it or one of its parents
        # (the benchmark's own process is the parent of the others: name it last).
        claimed: set[int] = set()
        if self._postmaster is None:
            self._postmaster = _postmaster()
        processes: dict[str, list[psutil.Process]] = {
            "postgresql": [self._postmaster, *self._postmaster.children()]
        }
        claimed.update(process.pid for process in processes["postgresql"])
        for name, pids in self.groups.items():
            roots = [psutil.Process(pid) for pid in pids]
            members = [*roots, *(c for r in roots for c in r.children(recursive=True))]
            processes[name] = [m for m in members if m.pid not in claimed]
            claimed.update(m.pid for m in members)
        sample: dict[str, dict[int, float]] = {}
        for name, members in processes.items():
            sample[name] = {}
            for process in members:
                try:
                    times = process.cpu_times()
                except psutil.NoSuchProcess:
                    continue
                sample[name][process.pid] = times.user + times.system
        return sample

    def __enter__(self) -> CpuMeter:
        self.before = self._sample()
        self._started = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self._started
        self.after = self._sample()

    def cpu_seconds(self) -> dict[str, float]:
        return {
            name: sum(used - self.before.get(name, {}).get(pid, 0.0) for pid, used in after.items())
            for name, after in self.after.items()
        }

    def report(
        self, units: int, unit: str, *, measured_elsewhere: dict[str, float] | None = None
    ) -> dict[str, Any]:
        """CPU milliseconds per ``unit`` by group and in total, how busy the machine's cores
        were, and the rate the total allows when every core is busy (a CPU-bound ceiling).
        ``measured_elsewhere``: CPU seconds of groups the meter could not read (processes that
        counted their own before they exited)."""
        used = self.cpu_seconds() | (measured_elsewhere or {})
        total = sum(used.values())
        cores = os.cpu_count() or 1
        per_unit = {name: round(seconds * 1000 / units, 3) for name, seconds in used.items()}
        return {
            f"cpu_ms_per_{unit}": {**per_unit, "total": round(total * 1000 / units, 3)},
            "cores": cores,
            "cores_busy_fraction": round(total / (cores * self.seconds), 2),
            f"cpu_bound_ceiling_{unit}s_per_second": round(units * cores / total, 1),
        }


def elapsed_ms(started: Any, completed: Any) -> float:
    """Milliseconds between two timestamps of a row (a tool call's handler run)."""
    return float((completed - started).total_seconds() * 1000) if started and completed else 0.0


def database_conninfo(alias: str = "owner") -> str:
    return db_roles.conninfo_from_settings(settings.DATABASES[alias])


def create_database() -> None:
    from tests.conftest import _create_test_database  # noqa: PLC0415 - the same set-up as tests

    _create_test_database()
    call_command("migrate", interactive=False, verbosity=0)


def drop_database() -> None:
    from django.db import connections  # noqa: PLC0415

    from tests.conftest import _maintenance_conninfo  # noqa: PLC0415

    connections.close_all()
    with psycopg.connect(_maintenance_conninfo(), autocommit=True) as conn:
        name = settings.DATABASES["owner"]["NAME"]
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def machine_facts() -> MachineFacts:
    return measure(database_conninfo("owner"))


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def database_counters() -> dict[str, int]:
    """Commits of the bench database and the WAL position (bytes written, cluster-wide)."""
    with psycopg.connect(database_conninfo("owner"), autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT xact_commit, pg_current_wal_lsn() - '0/0'::pg_lsn"
            " FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    assert row is not None
    return {"commits": int(row[0]), "wal_bytes": int(row[1])}


def make_agent(server: Any, *, kind: str = "openai", **fields: Any) -> Any:
    """An active agent of a new agency whose provider is the fake server."""
    from agents.models import LLMProvider  # noqa: PLC0415
    from core import tenancy  # noqa: PLC0415
    from tests.agents.factories import AgentFactory  # noqa: PLC0415
    from tests.factories import AgencyFactory, SiteFactory  # noqa: PLC0415

    agency = AgencyFactory.create()
    site = SiteFactory.create(agency=agency)
    with tenancy.agency_context(agency.id):
        provider = LLMProvider(
            agency=agency,
            provider_name=kind,
            api_endpoint=server.anthropic_base_url
            if kind == "anthropic"
            else server.openai_base_url,
        )
        provider.set_api_key("bench-key-not-real")
        provider.save()
    defaults: dict[str, Any] = {
        "allowed_tools": ["crm_get_contact"],
        "llm_provider": kind,
        "llm_model": f"bench-{uuid.uuid4().hex[:10]}",
        "max_steps_per_run": 1000,
        "max_runs_per_hour": 100_000,
        "max_runs_per_day": 100_000,
        "timeout_seconds": 3600,
        # The benchmarks repeat one call on purpose: loop detection (flow/loops.py) would stop them.
        "loop_threshold": 0,
    }
    defaults.update(fields)
    return AgentFactory.create(agency=agency, site=site, **defaults)


# The contact the in-process ReAct benchmarks look up, iteration after iteration.
LOOKUP_EMAIL = "ada@x.io"


def iterations_script(request: Any) -> Any:
    """The fake model's script for :func:`looping_agent`'s runs: the ``crm_get_contact`` call
    until the run has as many iterations as its model name says (``...-<iterations>``), then the
    final answer. Stateless, so that it can serve from its own process."""
    from devkit.fake_server.script import text_reply, tool_call_reply  # noqa: PLC0415

    if request.assistant_turns < int(request.model.rsplit("-", 1)[1]):
        return tool_call_reply("crm_get_contact", {"email": LOOKUP_EMAIL})
    return text_reply("Done.")


def looping_agent(server: Any, iterations: int) -> Any:
    """An agent of a new agency (:func:`make_agent`) whose runs last ``iterations`` ReAct
    iterations under :func:`iterations_script`, with the contact they look up."""
    from core import tenancy  # noqa: PLC0415
    from crm.models import Contact  # noqa: PLC0415

    agent = make_agent(server, llm_model=f"loop-{uuid.uuid4().hex[:8]}-{iterations}")
    with tenancy.agency_context(agent.agency_id):
        Contact.objects.create(agency_id=agent.agency_id, first_name="Ada", email=LOOKUP_EMAIL)
    return agent


def pending_execution(agent: Any) -> Execution:
    """A manual run of ``agent``, pending, its task not sent: the benchmark runs it in process."""
    from tests.processes import pending_execution as pending  # noqa: PLC0415

    return pending(agent, input_text="Look Ada up, again and again.")


def writing_transactions(execution_id: Any) -> int:
    """Distinct transactions that wrote a run's steps, tool calls and state transitions. A row's
    ``xmin`` is the id of the transaction that inserted it, so this counts the run's commits
    exactly, whatever else the database was doing (``pg_stat_database`` is flushed lazily)."""
    return _distinct_xmins(
        [
            ("agents_executionstep", "execution_id"),
            ("tools_toolcall", "execution_id"),
            ("agents_statetransition", "execution_id"),
        ],
        execution_id,
    )


def _distinct_xmins(tables: list[tuple[str, str]], key: Any, *, alias: str = "default") -> int:
    from django.db import connections  # noqa: PLC0415

    union = " UNION ALL ".join(
        f"SELECT xmin::text AS x FROM {table} WHERE {column} = %s" for table, column in tables
    )
    with connections[alias].cursor() as cursor:
        cursor.execute(f"SELECT count(DISTINCT x) FROM ({union}) AS t", [key] * len(tables))
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def langgraph_writing_transactions(thread_id: str) -> int:
    """The same count for a LangGraph thread's checkpoint rows (written as the owner role)."""
    tables = [("checkpoints", "thread_id"), ("checkpoint_writes", "thread_id"),
              ("checkpoint_blobs", "thread_id")]  # fmt: skip
    return _distinct_xmins(tables, thread_id, alias="owner")
