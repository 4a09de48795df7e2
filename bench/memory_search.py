"""Memory search at scale: HNSW build time, and the latency and recall@10 of a search filtered
to one agent and of an unfiltered one, under each candidate plan, prepared and unprepared.

The table is shaped as the memory search reads it (agency, agent, a short content, a 384-number
embedding; no RLS: the agency filter stands for it) and loaded with binary COPY: ``--rows``
memories (1,000,000 for the issue's figures) of 100 agencies and 2,000 agents whose sizes are
heavy-tailed (log-normal, 0.8 decades) from 10 to 5 % of the rows (50,000 of 1,000,000; median
94), in random heap order (memories of all agents interleave as they are written). Vectors are
clustered: 1,000 topics of 20 sub-topics in a 64-dimensional latent space, projected to 384
dimensions with a little noise and normalised (nearest neighbour ~0.75 cosine, same sub-topic
~0.7, same topic ~0.5, random 0.0, about what a sentence model gives). Each agency draws on 30
topics, each agent on 2 to 24 of its agency's (bigger agents more), with uneven weights; a query
is a fresh sample of the same agent's distribution (unfiltered: of a random memory's sub-topic).
recall@10 is against exact search over the float32 vectors (numpy), for both column types.

Plans (session settings of the connection; B-tree on (agency_id, agent_id), HNSW m=16,
ef_construction=64, cosine):
- ``default``: pgvector's defaults (``hnsw.ef_search`` 40, no iterative scan), the planner picks
  (with pgvector 0.8.2: the B-tree and a sort, an exact search, for nearly every agent);
- ``hnsw ef40``: the HNSW scan forced (``enable_sort = off``), no iterative scan;
- ``relaxed``/``strict`` ``efN``: forced too, ``hnsw.iterative_scan`` with ``hnsw.ef_search`` N,
  and one with ``hnsw.max_scan_tuples`` raised from 20,000 to 100,000;
- ``exact``: the agent's rows through the B-tree, then ordered by distance: a MATERIALIZED CTE
  the HNSW index cannot serve;
- ``hybrid``: the plan this benchmark recommends, run live: a bounded count of the agent's rows
  (``LIMIT threshold``), then ``exact`` below ``--threshold`` rows and the iterative scan above.

Modes: ``unprepared`` = client-side binding (psycopg ``ClientCursor``: the values in the SQL
text, what ``DATABASE_SERVER_SIDE_BINDING=false`` sends: a custom plan per query);
``prepared`` = a named prepared statement (``prepare=True``): after five executions
PostgreSQL may switch to one generic plan that does not know the agent. Each prepared connection
first runs 10 searches of random agents (a worker's history); the report says per size class
whether the generic plan ran and what each plan looked like (EXPLAIN of the class's first query).

Per size class (agents nearest 10, 30, 100, ... rows; ``--agents-per-class`` of them,
``--queries`` each, the agents in turn), every (plan, mode) connection runs every query, in
rotating order (machine drift and cache warmth spread evenly): p50/p95/p99 latency (client wall
time of execute + fetch) and recall@10 (mean, worst query, share of queries returning fewer
than 10). A plan whose median passes 50 ms after ``--slow-after`` queries stops for the class
(a forced HNSW scan of a tiny agent takes ~0.5 s). Unfiltered: latency and recall per
``hnsw.ef_search``, one client; then throughput with two client processes for ``--seconds``
each (queries/s, p95). Builds: ``maintenance_work_mem`` sized to hold the graph,
``max_parallel_maintenance_workers`` 1 (the leader builds too: two processes for two cores),
wall time and the build's CPU time. The PostgreSQL and pgvector versions, the settings, the
sizes, how busy the machine's cores were and the machine facts are printed from the same run.
Run it on an embedded server of its own (``AGENTDESK_DATA_DIR``): bench/README.md.

    AGENTDESK_DATA_DIR=/tmp/bench17-data .venv/bin/python -m bench.memory_search \\
        [--rows 1000000] [--queries 50] [--agents-per-class 3] [--seconds 8] \\
        [--threshold 2000] [--grid vector,halfvec] [--grid-plans NAME,...] [--slow-after 6] \\
        [--parts filtered,unfiltered] [--output results.json] [--keep] [--reuse]

``--keep`` leaves the database (name: ``AGENTDESK_TEST_DB``) for a later ``--reuse`` run with
the same ``--rows``, which regenerates the same data (fixed seed) and skips load and builds.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import struct
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np
import psutil
import psycopg
from psycopg import sql

from bench import common

DIMENSIONS = 384
K = 10
AGENCIES = 100
AGENTS = 2000
SMALLEST = 10  # memories of the smallest agent
LARGEST_FRACTION = 0.05  # of all rows, the largest agent's (50,000 of 1,000,000)
SIZE_SPREAD = 0.8  # decades: the standard deviation of log10(agent size)
LATENT = 64
TOPICS = 1000
SUBTOPICS = 20
TOPICS_PER_AGENCY = 30
SUBTOPIC_SPREAD = 0.7  # sub-topic centre = topic + this x N(0, I/LATENT), normalised
MEMORY_SPREAD = 0.08  # a memory = sub-topic + this x N(0, I) in the latent space
NOISE = 0.01  # isotropic noise in the 384 dimensions
CONTENT = (b"Customer prefers e-mail over phone calls and answers within a day; " * 3)[:160]
SEED = 17
CLASS_TARGETS = (10, 30, 100, 300, 1000, 3000, 10000, 50000)
WARM_UP = 10
SLOW_MS = 50.0  # median above which a plan stops early in a size class
MODES = ("unprepared", "prepared")
EF_SEARCH = (40, 100, 200)
EF_UNFILTERED = (40, 100, 200, 300)


# --- data -----------------------------------------------------------------------------------


def agent_sizes(rows: int, agents: int = AGENTS) -> np.ndarray:
    """Sizes from ``SMALLEST`` to ``LARGEST_FRACTION`` of ``rows``, summing to ``rows``: the
    quantiles of a log-normal distribution (``SIZE_SPREAD`` decades), its median chosen for the
    sum, clipped to that range, the largest agent exactly at the top (at 1,000,000 rows: median
    ~94, 10 % of the agents at 10, 11 over 10,000)."""
    largest = max(SMALLEST, round(rows * LARGEST_FRACTION))
    z = np.array([NormalDist().inv_cdf((i + 0.5) / agents) for i in range(agents)])

    def sizes(log_median: float) -> np.ndarray:
        spread = np.round(10 ** (log_median + SIZE_SPREAD * z))
        clipped = np.clip(spread, SMALLEST, largest).astype(np.int64)
        clipped[-1] = largest
        return clipped

    low, high = -3.0, 7.0
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (low, middle) if sizes(middle).sum() > rows else (middle, high)
    result = sizes(low)  # sums to at most ``rows``
    result[len(result) // 2] += rows - result.sum()  # the rounding's few rows, to a median agent
    assert result.min() >= SMALLEST
    assert result.sum() == rows
    return result


@dataclass
class Dataset:
    vectors: np.ndarray  # (rows, DIMENSIONS) float32, unit length; row i has id i + 1
    agent_of_row: np.ndarray
    sizes: np.ndarray  # per agent
    agency_of_agent: np.ndarray
    agent_ids: list[uuid.UUID]
    agency_ids: list[uuid.UUID]
    agent_topics: list[np.ndarray]
    agent_weights: list[np.ndarray]
    topic_of_row: np.ndarray
    subtopic_of_row: np.ndarray
    subtopics: np.ndarray  # (TOPICS, SUBTOPICS, LATENT)
    projection: np.ndarray  # (DIMENSIONS, LATENT), orthonormal columns
    rng: np.random.Generator
    rows_by_agent: list[np.ndarray] = field(default_factory=list)  # row indexes per agent

    def sample(self, topics: np.ndarray, subtopics: np.ndarray) -> np.ndarray:
        latent = self.subtopics[topics, subtopics] + MEMORY_SPREAD * self.rng.standard_normal(
            (len(topics), LATENT)
        )
        x = latent @ self.projection.T + NOISE * self.rng.standard_normal((len(topics), DIMENSIONS))
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)

    def agent_queries(self, agent: int, count: int) -> np.ndarray:
        topics = self.rng.choice(self.agent_topics[agent], count, p=self.agent_weights[agent])
        return self.sample(topics, self.rng.integers(0, SUBTOPICS, count))

    def global_queries(self, count: int) -> np.ndarray:
        rows = self.rng.integers(0, len(self.agent_of_row), count)
        return self.sample(self.topic_of_row[rows], self.subtopic_of_row[rows])


def _unit(a: np.ndarray) -> np.ndarray:
    return a / np.linalg.norm(a, axis=-1, keepdims=True)


def generate(rows: int) -> Dataset:
    rng = np.random.default_rng(SEED)
    projection = np.linalg.qr(rng.standard_normal((DIMENSIONS, LATENT)))[0]
    topics = _unit(rng.standard_normal((TOPICS, LATENT)))
    subtopics = _unit(
        topics[:, None, :]
        + SUBTOPIC_SPREAD / LATENT**0.5 * rng.standard_normal((TOPICS, SUBTOPICS, LATENT))
    )
    sizes = agent_sizes(rows)
    agency_of_agent = rng.integers(0, AGENCIES, AGENTS)
    pools = [rng.choice(TOPICS, TOPICS_PER_AGENCY, replace=False) for _ in range(AGENCIES)]
    agent_topics, agent_weights, topic_blocks = [], [], []
    for agent, size in enumerate(sizes):
        count = int(np.clip(round(2 + size**0.5 / 10), 2, TOPICS_PER_AGENCY))
        chosen = rng.choice(pools[agency_of_agent[agent]], count, replace=False)
        weights = rng.dirichlet(np.ones(count))
        agent_topics.append(chosen)
        agent_weights.append(weights)
        topic_blocks.append(rng.choice(chosen, size, p=weights))
    order = rng.permutation(rows)  # heap position of each (agent-sorted) memory
    agent_of_row = np.empty(rows, np.int32)
    agent_of_row[order] = np.repeat(np.arange(AGENTS, dtype=np.int32), sizes)
    topic_of_row = np.empty(rows, np.int64)
    topic_of_row[order] = np.concatenate(topic_blocks)
    subtopic_of_row = rng.integers(0, SUBTOPICS, rows)
    data = Dataset(
        vectors=np.empty((rows, DIMENSIONS), np.float32),
        agent_of_row=agent_of_row,
        sizes=sizes,
        agency_of_agent=agency_of_agent,
        agent_ids=[uuid.UUID(bytes=rng.bytes(16), version=4) for _ in range(AGENTS)],
        agency_ids=[uuid.UUID(bytes=rng.bytes(16), version=4) for _ in range(AGENCIES)],
        agent_topics=agent_topics,
        agent_weights=agent_weights,
        topic_of_row=topic_of_row,
        subtopic_of_row=subtopic_of_row,
        subtopics=subtopics,
        projection=projection,
        rng=rng,
    )
    for start in range(0, rows, 100_000):
        stop = min(rows, start + 100_000)
        data.vectors[start:stop] = data.sample(
            topic_of_row[start:stop], subtopic_of_row[start:stop]
        )
    by_agent = np.argsort(agent_of_row, kind="stable")
    data.rows_by_agent = np.split(by_agent, np.cumsum(sizes)[:-1])
    return data


# --- load and build -------------------------------------------------------------------------

TABLES = {"vector": "bench_memory", "halfvec": "bench_memory_half"}


def _copy_dtype(kind: str) -> tuple[np.dtype[Any], int]:
    number = ">f4" if kind == "vector" else ">f2"
    width = 4 if kind == "vector" else 2
    return np.dtype(
        [
            ("fields", ">i2"),
            ("id_len", ">i4"),
            ("id", ">i8"),
            ("agency_len", ">i4"),
            ("agency", "u1", (16,)),
            ("agent_len", ">i4"),
            ("agent", "u1", (16,)),
            ("content_len", ">i4"),
            ("content", f"S{len(CONTENT)}"),
            ("embedding_len", ">i4"),
            ("dim", ">i2"),
            ("unused", ">i2"),
            ("embedding", number, (DIMENSIONS,)),
        ]
    ), 4 + width * DIMENSIONS


def load(conn: psycopg.Connection[Any], data: Dataset, kind: str) -> float:
    """Create the table and COPY every row in binary (the rows built by numpy, 50,000 a
    write); then the primary key, the (agency, agent) B-tree, VACUUM ANALYZE. Seconds."""
    table = sql.Identifier(TABLES[kind])
    started = time.perf_counter()
    conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))
    conn.execute(
        sql.SQL(
            "CREATE TABLE {} (id bigint NOT NULL, agency_id uuid NOT NULL, agent_id uuid NOT NULL,"
            " content text NOT NULL, embedding {}({}) NOT NULL)"
        ).format(table, sql.SQL(kind), sql.Literal(DIMENSIONS))
    )
    dtype, embedding_len = _copy_dtype(kind)
    agency_bytes = np.frombuffer(b"".join(u.bytes for u in data.agency_ids), np.uint8).reshape(
        AGENCIES, 16
    )
    agent_bytes = np.frombuffer(b"".join(u.bytes for u in data.agent_ids), np.uint8).reshape(
        AGENTS, 16
    )
    rows = len(data.agent_of_row)
    copy_sql = sql.SQL(
        "COPY {} (id, agency_id, agent_id, content, embedding) FROM STDIN (FORMAT BINARY)"
    ).format(table)
    with conn.cursor() as cursor, cursor.copy(copy_sql) as copy:
        copy.write(b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0))
        for start in range(0, rows, 50_000):
            stop = min(rows, start + 50_000)
            agents = data.agent_of_row[start:stop]
            block = np.zeros(stop - start, dtype)
            block["fields"] = 5
            block["id_len"], block["id"] = 8, np.arange(start + 1, stop + 1)
            block["agency_len"] = block["agent_len"] = 16
            block["agency"] = agency_bytes[data.agency_of_agent[agents]]
            block["agent"] = agent_bytes[agents]
            block["content_len"], block["content"] = len(CONTENT), CONTENT
            block["embedding_len"], block["dim"] = embedding_len, DIMENSIONS
            block["embedding"] = data.vectors[start:stop]
            copy.write(block.tobytes())
        copy.write(struct.pack(">h", -1))
    conn.execute(sql.SQL("ALTER TABLE {} ADD PRIMARY KEY (id)").format(table))
    conn.execute(
        sql.SQL("CREATE INDEX {} ON {} (agency_id, agent_id)").format(
            sql.Identifier(f"{TABLES[kind]}_agent"), table
        )
    )
    conn.execute(sql.SQL("VACUUM ANALYZE {}").format(table))
    return time.perf_counter() - started


class Busy:
    """Wall time of a stretch, how many of the machine's cores were busy over it (everyone's
    work: the machine is shared), and the CPU seconds one backend spent with the children its
    postmaster reaped meanwhile (its parallel workers: they exit before the stretch ends)."""

    def __init__(self, backend_pid: int | None = None) -> None:
        self.backend = psutil.Process(backend_pid) if backend_pid else None
        self.postmaster = psutil.Process(self.backend.ppid()) if self.backend else None
        self.seconds = self.server_cpu = self.cores_busy = 0.0

    def _server(self) -> float:
        if not (self.backend and self.postmaster):
            return 0.0
        own, reaped = self.backend.cpu_times(), self.postmaster.cpu_times()
        return own.user + own.system + reaped.children_user + reaped.children_system

    def __enter__(self) -> Busy:
        self._machine = psutil.cpu_times()
        self._cpu = self._server()
        self._started = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self._started
        self.server_cpu = self._server() - self._cpu
        now = psutil.cpu_times()
        idle = (now.idle + now.iowait) - (self._machine.idle + self._machine.iowait)
        total = sum(now) - sum(self._machine)
        self.cores_busy = (1 - idle / total) * (psutil.cpu_count() or 1) if total else 0.0


def maintenance_work_mem(rows: int) -> str:
    """Room for the whole graph (pgvector builds on disk, far slower, once it no longer fits):
    ~3 KiB per element (vector, neighbours), rounded up to 256 MiB."""
    mib = max(512, -(-rows * 3072 // (256 << 20)) * 256)
    return f"{mib}MB"


def checkpoint() -> None:
    """CHECKPOINT as the superuser when one is configured (the owner may not)."""
    from config.env import service_urls  # noqa: PLC0415

    if service_urls().database_admin:
        with psycopg.connect(service_urls().database_admin, autocommit=True) as admin:
            admin.execute("CHECKPOINT")


def build(conn: psycopg.Connection[Any], kind: str, rows: int) -> dict[str, Any]:
    notices: list[str] = []
    conn.add_notice_handler(lambda d: notices.append(str(d.message_primary)))
    conn.execute(
        "SELECT set_config('maintenance_work_mem', %s, false)", [maintenance_work_mem(rows)]
    )
    conn.execute("SET max_parallel_maintenance_workers = 1")
    index = f"{TABLES[kind]}_hnsw"
    checkpoint()  # the load's dirty pages are not the build's to write
    with Busy(conn.info.backend_pid) as busy:
        conn.execute(
            sql.SQL(
                "CREATE INDEX {} ON {} USING hnsw (embedding {})"
                " WITH (m = 16, ef_construction = 64)"
            ).format(
                sql.Identifier(index), sql.Identifier(TABLES[kind]), sql.SQL(f"{kind}_cosine_ops")
            )
        )
    size = conn.execute("SELECT pg_relation_size(%s)", [index]).fetchone()
    assert size is not None
    return {
        "seconds": round(busy.seconds, 1),
        "rows_per_second": round(rows / busy.seconds),
        # The build's own CPU (the backend and its parallel worker): on a shared machine the
        # wall time depends on the others, this does not; / 2 = the wall time on 2 idle cores.
        "server_cpu_seconds": round(busy.server_cpu, 1),
        "machine_cores_busy": round(busy.cores_busy, 2),
        "index_mib": round(size[0] / 2**20),
        "maintenance_work_mem": maintenance_work_mem(rows),
        "max_parallel_maintenance_workers": 1,
        "notices": notices,
    }


# --- searching ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    name: str
    settings: tuple[tuple[str, str], ...] = ()
    exact: bool = False
    threshold: int = 0  # hybrid: exact below this many rows of the agent


# pgvector 0.8.2's costs make the planner pick the B-tree and a sort for every agent up to 1 % of
# the rows, in both modes (measured: bench/README.md): the HNSW plans are forced by making the
# sort the disabled choice (``enable_sort = off``: the HNSW index scan is the only path that
# needs none).
FORCE_HNSW = ("enable_sort", "off")


def iterative(mode: str, ef: int, max_scan_tuples: int | None = None) -> Plan:
    settings = [FORCE_HNSW, ("hnsw.iterative_scan", f"{mode}_order"), ("hnsw.ef_search", str(ef))]
    name = f"{mode} ef{ef}"
    if max_scan_tuples:
        settings.append(("hnsw.max_scan_tuples", str(max_scan_tuples)))
        settings.append(("hnsw.scan_mem_multiplier", "10"))
        name += f" mst{max_scan_tuples // 1000}k"
    return Plan(name, tuple(settings))


GRID = (
    Plan("default"),
    Plan("hnsw ef40", (FORCE_HNSW,)),  # forced, no iterative scan: filtered after the scan
    *(iterative("relaxed", ef) for ef in EF_SEARCH),
    *(iterative("strict", ef) for ef in EF_SEARCH),
    iterative("relaxed", 40, 100_000),  # with scan_mem_multiplier 10, or memory stops it first
    Plan("exact", exact=True),
)

HNSW_SQL = (
    "SELECT id FROM {table} WHERE agency_id = %(agency)s AND agent_id = %(agent)s"
    " ORDER BY embedding <=> %(query)s LIMIT 10"
)
EXACT_SQL = (
    "WITH scored AS MATERIALIZED (SELECT id, embedding <=> %(query)s AS distance FROM {table}"
    " WHERE agency_id = %(agency)s AND agent_id = %(agent)s) SELECT id FROM scored"
    " ORDER BY distance LIMIT 10"
)
COUNT_SQL = (
    "SELECT count(*) FROM (SELECT 1 FROM {table} WHERE agency_id = %(agency)s"
    " AND agent_id = %(agent)s LIMIT %(limit)s) AS bounded"
)
UNFILTERED_SQL = "SELECT id FROM {table} ORDER BY embedding <=> %(query)s LIMIT 10"


def vector_text(vector: np.ndarray) -> str:
    # Sent as text of unknown type, as pgvector's Django field sends it: the server casts it to
    # the column's type (vector or halfvec), and the same text serves both tables.
    return "[" + ",".join(f"{v:.9g}" for v in vector.tolist()) + "]"


class Client:
    """One connection with a plan's session settings, searching in one mode."""

    def __init__(self, conninfo: str, kind: str, plan: Plan, mode: str, *, filtered: bool = True):
        self.plan, self.mode = plan, mode
        self.conn = psycopg.connect(conninfo, autocommit=True)
        # Nothing prepared but what asks for it (None would turn ``prepare=True`` off too).
        self.conn.prepare_threshold = 10**9
        for name, value in plan.settings:
            self.conn.execute("SELECT set_config(%s, %s, false)", [name, value])
        table = TABLES[kind]
        if not filtered:
            self.query = UNFILTERED_SQL.format(table=table)
        else:
            self.query = (EXACT_SQL if plan.exact else HNSW_SQL).format(table=table)
        self.exact_query = EXACT_SQL.format(table=table)
        self.count_query = COUNT_SQL.format(table=table)
        self.cursor = psycopg.ClientCursor(self.conn)

    def _run(self, query: str, params: dict[str, Any]) -> list[Any]:
        if self.mode == "prepared":
            return self.conn.execute(query, params, prepare=True).fetchall()
        return self.cursor.execute(query, params).fetchall()

    def search(self, params: dict[str, Any]) -> tuple[float, list[int]]:
        started = time.perf_counter()
        query = self.query
        if self.plan.threshold:
            counted = self._run(self.count_query, {**params, "limit": self.plan.threshold})
            if counted[0][0] < self.plan.threshold:
                query = self.exact_query
        rows = self._run(query, params)
        return (time.perf_counter() - started) * 1000, [row[0] for row in rows]

    def plan_counts(self) -> dict[str, tuple[int, int]]:
        """(generic, custom) executions of each prepared statement of this connection."""
        rows = self.conn.execute(
            "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE NOT from_sql"
        ).fetchall()
        return {row[0]: (int(row[1]), int(row[2])) for row in rows}

    def explain(self, params: dict[str, Any]) -> str:
        """The plan this connection runs for ``params`` (a prepared statement through EXPLAIN
        EXECUTE: generic or custom as the plan cache decides)."""
        query = self.query
        if self.plan.threshold:
            counted = self._run(self.count_query, {**params, "limit": self.plan.threshold})
            if counted[0][0] < self.plan.threshold:
                query = self.exact_query
        if self.mode == "unprepared":
            row = self.cursor.execute("EXPLAIN (FORMAT JSON) " + query, params).fetchone()
        else:
            found = self.conn.execute(
                "SELECT name, parameter_types::text[] FROM pg_prepared_statements"
                " WHERE NOT from_sql AND statement = %s",
                [_dollar(query)],
            ).fetchone()
            assert found is not None, "the statement was not prepared"
            name, types = found
            values = [params[key] for key in _placeholders(query)]
            placeholders = sql.SQL(", ").join(
                sql.SQL("{}::{}").format(sql.Literal(str(value)), sql.SQL(t))
                for value, t in zip(values, types, strict=True)
            )
            row = self.conn.execute(
                sql.SQL("EXPLAIN (FORMAT JSON) EXECUTE {} ({})").format(
                    sql.Identifier(name), placeholders
                )
            ).fetchone()
        assert row is not None
        return shape(row[0][0]["Plan"])

    def close(self) -> None:
        self.conn.close()


def _placeholders(query: str) -> list[str]:
    """The named parameters of ``query`` in order of first appearance (psycopg numbers them so)."""
    names: list[str] = []
    for part in query.split("%(")[1:]:
        name = part.split(")s", 1)[0]
        if name not in names:
            names.append(name)
    return names


def _dollar(query: str) -> str:
    """``query`` as psycopg sends it to be prepared: ``%(name)s`` -> ``$n``."""
    for number, name in enumerate(_placeholders(query), start=1):
        query = query.replace(f"%({name})s", f"${number}")
    return query


def shape(node: dict[str, Any]) -> str:
    """A plan in one line: node types, indexes by role (hnsw / btree), pre-order."""
    label = str(node["Node Type"])
    index = str(node.get("Index Name", ""))
    if index:
        label += " hnsw" if index.endswith("_hnsw") else " btree"
    children = [shape(child) for child in node.get("Plans", [])]
    return label + (" > " + " + ".join(children) if children else "")


def summary(latencies: list[float], recalls: list[float], short: int) -> dict[str, Any]:
    return {
        "queries": len(latencies),
        "p50_ms": round(common.percentile(latencies, 50), 2),
        "p95_ms": round(common.percentile(latencies, 95), 2),
        "p99_ms": round(common.percentile(latencies, 99), 2),
        "recall_at_10": round(statistics.fmean(recalls), 4),
        "worst_recall": round(min(recalls), 2),
        "short_share": round(short / len(latencies), 3),  # queries returning fewer than 10
    }


def exact_top(vectors: np.ndarray, rows: np.ndarray, query: np.ndarray) -> set[int]:
    distances = vectors[rows] @ query
    best = rows[np.argpartition(-distances, K - 1)[:K]] if len(rows) > K else rows
    return {int(row) + 1 for row in best}


def size_classes(data: Dataset, per_class: int) -> list[tuple[int, list[int]]]:
    """For each target size the real agents nearest to it (never one agent in two classes; the
    largest targets choose first, so that the largest agents are theirs)."""
    taken: set[int] = set()
    classes = []
    largest = int(data.sizes.max())
    for target in sorted((*(t for t in CLASS_TARGETS if t < largest), largest), reverse=True):
        ranked = np.argsort(np.abs(np.log(data.sizes / target)), kind="stable")
        chosen = [int(a) for a in ranked if int(a) not in taken][:per_class]
        taken.update(chosen)
        classes.append((target, chosen))
    return classes[::-1]


def params_for(data: Dataset, agent: int, query: np.ndarray) -> dict[str, Any]:
    return {
        "agency": data.agency_ids[data.agency_of_agent[agent]],
        "agent": data.agent_ids[agent],
        "query": vector_text(query),
    }


def rotated(items: Sequence[Any], offset: int) -> Iterator[Any]:
    for i in range(len(items)):
        yield items[(i + offset) % len(items)]


def too_slow(latencies: list[float], slow_after: int = 6) -> bool:
    """A plan far off the goal stops early in its class (a forced HNSW scan of a 10-row agent
    reads ~20,000 heap tuples: ~0.4 s at 200,000 rows): its figures then come from fewer
    queries, which the report shows."""
    return len(latencies) >= slow_after and statistics.median(latencies) > SLOW_MS


def filtered_search(
    conninfo: str, data: Dataset, kind: str, plans: Sequence[Plan], args: argparse.Namespace
) -> list[dict[str, Any]]:
    clients = [Client(conninfo, kind, plan, mode) for plan in plans for mode in MODES]
    for client in clients:
        if client.mode == "prepared":  # a worker's history: random agents, mostly small
            for agent in data.rng.integers(0, AGENTS, WARM_UP):
                client.search(params_for(data, int(agent), data.agent_queries(int(agent), 1)[0]))
    results = []
    offset = 0
    try:
        for target, agents in size_classes(data, args.agents_per_class):
            latencies: dict[int, list[float]] = {i: [] for i in range(len(clients))}
            recalls: dict[int, list[float]] = {i: [] for i in range(len(clients))}
            short = dict.fromkeys(range(len(clients)), 0)
            counts_before = [c.plan_counts() for c in clients]
            first: dict[str, Any] = {}
            busy = Busy()
            queries = {agent: data.agent_queries(agent, args.queries) for agent in agents}
            with busy:
                for n in range(args.queries):
                    for agent in agents:  # the agents in turn: a plan stopped early saw them all
                        query = queries[agent][n]
                        truth = exact_top(data.vectors, data.rows_by_agent[agent], query)
                        params = params_for(data, agent, query)
                        first = first or params
                        offset += 1
                        for i in rotated(range(len(clients)), offset):
                            if too_slow(latencies[i], args.slow_after):
                                continue
                            ms, ids = clients[i].search(params)
                            latencies[i].append(ms)
                            recalls[i].append(len(truth.intersection(ids)) / K)
                            short[i] += len(ids) < K
            for i, client in enumerate(clients):
                counts = client.plan_counts()
                generic = sum(
                    g - counts_before[i].get(s, (0, 0))[0] for s, (g, _) in counts.items()
                )
                custom = sum(c - counts_before[i].get(s, (0, 0))[1] for s, (_, c) in counts.items())
                results.append(
                    {
                        "table": kind,
                        "class": target,
                        "agent_sizes": [int(data.sizes[a]) for a in agents],
                        "plan": client.plan.name,
                        "mode": client.mode,
                        **summary(latencies[i], recalls[i], short[i]),
                        "machine_cores_busy": round(busy.cores_busy, 2),
                        "generic_plans": generic if client.mode == "prepared" else None,
                        "custom_plans": custom if client.mode == "prepared" else None,
                        "shape": client.explain(first),
                    }
                )
            print(f"  {kind} class {target} ({[int(data.sizes[a]) for a in agents]}) done "
                  f"{time.strftime('%H:%M:%S')}", flush=True)  # fmt: skip
    finally:
        for client in clients:
            client.close()
    return results


def unfiltered_latency(
    conninfo: str, data: Dataset, kind: str, queries: np.ndarray, truths: list[set[int]]
) -> list[dict[str, Any]]:
    clients = [
        Client(
            conninfo, kind, Plan(f"ef{ef}", (("hnsw.ef_search", str(ef)),)), mode, filtered=False
        )
        for ef in EF_UNFILTERED
        for mode in MODES
    ]
    latencies: dict[int, list[float]] = {i: [] for i in range(len(clients))}
    recalls: dict[int, list[float]] = {i: [] for i in range(len(clients))}
    short = dict.fromkeys(range(len(clients)), 0)
    try:
        for n, (query, truth) in enumerate(zip(queries, truths, strict=True)):
            params = {"query": vector_text(query)}
            for i in rotated(range(len(clients)), n):
                ms, ids = clients[i].search(params)
                if n >= WARM_UP:
                    latencies[i].append(ms)
                    recalls[i].append(len(truth.intersection(ids)) / K)
                    short[i] += len(ids) < K
    finally:
        for client in clients:
            client.close()
    return [
        {
            "table": kind,
            "plan": c.plan.name,
            "mode": c.mode,
            **summary(latencies[i], recalls[i], short[i]),
        }
        for i, c in enumerate(clients)
    ]


@dataclass(frozen=True)
class Throughput:
    """One unfiltered throughput run: ``clients`` processes, each its own connection."""

    conninfo: str
    kind: str
    ef: int
    mode: str
    seconds: float
    clients: int = 2

    def client(self, queries: list[str], truths: list[set[int]], start_at: float, out: Any) -> None:
        """One client process: warm up, wait for the common start, search until the end."""
        plan = Plan(f"ef{self.ef}", (("hnsw.ef_search", str(self.ef)),))
        client = Client(self.conninfo, self.kind, plan, self.mode, filtered=False)
        for text in queries[:WARM_UP]:
            client.search({"query": text})
        latencies: list[float] = []
        hits = 0
        while time.time() < start_at:
            time.sleep(0.001)
        deadline = time.perf_counter() + self.seconds
        while time.perf_counter() < deadline:
            n = len(latencies) % len(queries)
            ms, ids = client.search({"query": queries[n]})
            latencies.append(ms)
            hits += len(truths[n].intersection(ids))
        client.close()
        out.put((latencies, hits))

    def run(self, queries: np.ndarray, truths: list[set[int]]) -> dict[str, Any]:
        context = multiprocessing.get_context("fork")
        results = context.Queue()
        texts = [vector_text(q) for q in queries]
        start_at = time.time() + 2.0  # after every client has connected and warmed up
        processes = []
        for c in range(self.clients):
            shift = c * len(texts) // self.clients  # each client its own order of the queries
            mine = (texts[shift:] + texts[:shift], truths[shift:] + truths[:shift])
            processes.append(context.Process(target=self.client, args=(*mine, start_at, results)))
        with Busy() as busy:
            for process in processes:
                process.start()
            collected = [results.get(timeout=self.seconds + 120) for _ in processes]
            for process in processes:
                process.join(10)
        latencies = [ms for part, _ in collected for ms in part]
        hits = sum(h for _, h in collected)
        return {
            "table": self.kind,
            "plan": f"ef{self.ef}",
            "mode": self.mode,
            "clients": self.clients,
            "queries_per_second": round(len(latencies) / self.seconds, 1),
            "p50_ms": round(common.percentile(latencies, 50), 2),
            "p95_ms": round(common.percentile(latencies, 95), 2),
            "p99_ms": round(common.percentile(latencies, 99), 2),
            "recall_at_10": round(hits / (K * len(latencies)), 4),
            "machine_cores_busy": round(busy.cores_busy, 2),  # includes 2 s of connecting
        }


# --- report ---------------------------------------------------------------------------------


def server_facts(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    names = (
        "server_version", "shared_buffers", "work_mem", "effective_cache_size",
        "random_page_cost", "jit", "max_worker_processes", "max_parallel_workers",
    )  # fmt: skip
    for name in names:
        row = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()
        facts[name] = row[0] if row else None
    row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    facts["pgvector"] = row[0] if row else None
    return facts


def table_sizes(conn: psycopg.Connection[Any]) -> dict[str, int]:
    sizes = {}
    for table in TABLES.values():
        for relation in (table, f"{table}_agent", f"{table}_hnsw"):
            row = conn.execute("SELECT pg_relation_size(to_regclass(%s))", [relation]).fetchone()
            if row and row[0] is not None:
                sizes[relation] = round(row[0] / 2**20)
    return sizes


def print_filtered(results: list[dict[str, Any]]) -> None:
    for kind in TABLES:
        rows = [r for r in results if r["table"] == kind]
        if not rows:
            continue
        print(f"\nfiltered to one agent, {kind} (p50 / p95 / p99 ms, recall@10 mean / worst,"
              f" share short, generic plans, plan of the class's first query):")  # fmt: skip
        for plan in dict.fromkeys(r["plan"] for r in rows):
            print(f"  {plan}")
            for r in rows:
                if r["plan"] != plan:
                    continue
                generic = (
                    f" generic {r['generic_plans']}/{r['generic_plans'] + r['custom_plans']}"
                    if r["mode"] == "prepared"
                    else ""
                )
                print(
                    f"    {r['mode']:10} {r['class']:>6} rows {r['agent_sizes']}: "
                    f"{r['p50_ms']:7.2f} / {r['p95_ms']:7.2f} / {r['p99_ms']:7.2f}  "
                    f"recall {r['recall_at_10']:.3f} / {r['worst_recall']:.1f}  "
                    f"short {r['short_share']:.2f}{generic} n={r['queries']}  [{r['shape']}]"
                )


def suggest_threshold(results: list[dict[str, Any]], kind: str, hnsw_plan: str) -> dict[str, Any]:
    """Per size class: the slower mode's p99 of ``exact`` against ``hnsw_plan``; the threshold
    lies between the last class where exact is faster and the first where it is not."""
    by: dict[tuple[str, int], float] = {}
    for r in results:
        if r["table"] == kind and r["plan"] in ("exact", hnsw_plan):
            key = (r["plan"], r["class"])
            by[key] = max(by.get(key, 0.0), r["p99_ms"])
    classes = sorted({c for _, c in by})
    rows = [(c, by.get(("exact", c)), by.get((hnsw_plan, c))) for c in classes]
    faster = [c for c, e, h in rows if e is not None and h is not None and e <= h]
    return {"hnsw_plan": hnsw_plan, "p99_exact_vs_hnsw": rows,
            "exact_faster_up_to_class": max(faster) if faster else None}  # fmt: skip


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=50, help="per agent of a size class")
    parser.add_argument("--agents-per-class", type=int, default=3)
    parser.add_argument("--unfiltered-queries", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=8.0, help="per throughput run")
    parser.add_argument("--threshold", type=int, default=2000, help="hybrid: exact below")
    parser.add_argument("--hybrid-iterative", default="relaxed", choices=("relaxed", "strict"))
    parser.add_argument("--hybrid-ef", type=int, default=40)
    parser.add_argument("--tables", default="vector,halfvec")
    parser.add_argument("--grid", default="vector,halfvec", help="tables the full grid runs on")
    parser.add_argument("--grid-plans", default="", help="names of the grid's plans; all if empty")
    parser.add_argument("--slow-after", type=int, default=6, help="queries before a slow stop")
    parser.add_argument("--parts", default="filtered,unfiltered")
    parser.add_argument("--output", default="")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--reuse", action="store_true")
    return parser.parse_args()


class Clock:
    def __init__(self) -> None:
        self.began = time.perf_counter()

    def say(self, text: str) -> None:
        print(f"{time.perf_counter() - self.began:7.1f}s {text}", flush=True)


def set_up(args: argparse.Namespace, report: dict[str, Any], clock: Clock) -> Dataset:
    """Generate the data; unless ``--reuse``: load and index every table (timed)."""
    data = generate(args.rows)
    sizes = data.sizes
    report["agent_sizes"] = {
        "min": int(sizes.min()),
        "median": int(np.median(sizes)),
        "max": int(sizes.max()),
        "agents_under_100": int((sizes < 100).sum()),
        "agents_over_10000": int((sizes > 10000).sum()),
    }
    clock.say(f"generated {args.rows} vectors; agent sizes {report['agent_sizes']}")
    with psycopg.connect(common.database_conninfo("owner"), autocommit=True) as conn:
        report["server"] = server_facts(conn)
        print(f"server: {report['server']}", flush=True)
        if not args.reuse:
            report["load_seconds"], report["build"] = {}, {}
            for kind in args.tables.split(","):
                report["load_seconds"][kind] = round(load(conn, data, kind), 1)
                clock.say(f"loaded {kind}: {report['load_seconds'][kind]} s")
                report["build"][kind] = build(conn, kind, args.rows)
                clock.say(f"HNSW build {kind}: {report['build'][kind]}")
        report["sizes_mib"] = table_sizes(conn)
        print(f"sizes (MiB): {report['sizes_mib']}", flush=True)
    return data


def run_filtered(
    args: argparse.Namespace, data: Dataset, report: dict[str, Any], clock: Clock
) -> None:
    conninfo = common.database_conninfo("owner")
    hnsw_part = iterative(args.hybrid_iterative, args.hybrid_ef)
    hybrid = Plan(
        f"hybrid <{args.threshold} exact, else {hnsw_part.name}",
        hnsw_part.settings,
        threshold=args.threshold,
    )
    report["filtered"] = []
    for kind in args.tables.split(","):
        chosen = (
            args.grid_plans.split(",") if kind in args.grid.split(",") else ["default", "exact"]
        )
        plans = [*(p for p in GRID if not chosen[0] or p.name in chosen), hybrid]
        report["filtered"] += filtered_search(conninfo, data, kind, plans, args)
        clock.say(f"filtered {kind} done")
    print_filtered(report["filtered"])
    report["threshold"] = {
        k: suggest_threshold(report["filtered"], k, hnsw_part.name) for k in args.tables.split(",")
    }
    print(f"\nexact against the hybrid's HNSW plan (worse mode's p99): {report['threshold']}")


def run_unfiltered(
    args: argparse.Namespace, data: Dataset, report: dict[str, Any], clock: Clock
) -> None:
    conninfo = common.database_conninfo("owner")
    queries = data.global_queries(args.unfiltered_queries + WARM_UP)
    truths = []
    for start in range(0, len(queries), 100):
        scores = queries[start : start + 100] @ data.vectors.T
        best = np.argpartition(-scores, K - 1, axis=1)[:, :K]
        truths += [{int(r) + 1 for r in row} for row in best]
    clock.say("unfiltered ground truth done")
    report["unfiltered"], report["throughput"] = [], []
    for kind in args.tables.split(","):
        report["unfiltered"] += unfiltered_latency(conninfo, data, kind, queries, truths)
        for ef in EF_UNFILTERED:
            for mode in MODES:
                run = Throughput(conninfo, kind, ef, mode, args.seconds)
                report["throughput"].append(run.run(queries[WARM_UP:], truths[WARM_UP:]))
                clock.say(f"throughput {report['throughput'][-1]}")
    print("\nunfiltered, one client (p50 / p95 / p99 ms, recall@10):")
    for r in report["unfiltered"]:
        print(
            f"  {r['table']:8} {r['plan']:6} {r['mode']:10} {r['p50_ms']:6.2f} / "
            f"{r['p95_ms']:6.2f} / {r['p99_ms']:6.2f}  recall {r['recall_at_10']:.4f}"
        )
    print("unfiltered, two client processes:")
    for r in report["throughput"]:
        print(
            f"  {r['table']:8} {r['plan']:6} {r['mode']:10} {r['queries_per_second']:7.1f} q/s  "
            f"p50 {r['p50_ms']:.2f}  p95 {r['p95_ms']:.2f}  p99 {r['p99_ms']:.2f} ms  "
            f"recall {r['recall_at_10']:.4f}"
        )


def main() -> None:
    args = parse_args()
    clock = Clock()
    if not args.reuse:
        from tests.conftest import _create_test_database  # noqa: PLC0415 - as common does

        _create_test_database()  # no migrations: the benchmark's own tables only
    report: dict[str, Any] = {"rows": args.rows, "agents": AGENTS, "agencies": AGENCIES}
    try:
        facts = common.machine_facts()
        report["machine"] = facts.as_dict()
        print(f"machine: {facts.describe()}", flush=True)
        data = set_up(args, report, clock)
        if "filtered" in args.parts.split(","):
            run_filtered(args, data, report, clock)
        if "unfiltered" in args.parts.split(","):
            run_unfiltered(args, data, report, clock)
        report["machine_after"] = common.machine_facts().as_dict()
        report["total_seconds"] = round(time.perf_counter() - clock.began)
        print(f"\nmachine after: {report['machine_after']}; total {report['total_seconds']} s")
    finally:
        if args.output:
            with open(args.output, "w") as out:
                json.dump(report, out, indent=1, default=str)
        if not args.keep:
            common.drop_database()


if __name__ == "__main__":
    main()
