"""Three machines on one (issue 29, "Many machines"): PostgreSQL and Redis in a services network
namespace, a web process, beat and a worker on node a, a worker on node b, each node reaching
the services over its own virtual ethernet link and the fake model server on its own loopback.
Runs started through node a's API spread over both nodes' workers; node b's worker is killed
with SIGKILL while every run waits for its second model call, its CRM note committed: node b's
runs go on on node a, and each run's note exists once.

Real servers and processes throughout; the test makes and removes the namespaces (root, and
``ip``, needed: skipped with the reason otherwise). Cluster settings are production's where it
matters: a 300 s lease, so the heartbeat (3 s, silent after 10 s) and beat's reaper hand the
runs on, not the lease."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import Reply, by_turn, tool_call_reply
from tests.cluster import netns, services
from tests.cluster.netns import Cluster
from tests.cluster.services import Services
from tests.processes import ROOT, TERMINAL, AsgiServer, Worker, _log_dir

pytestmark = pytest.mark.slow
logger = logging.getLogger(__name__)
RUNS = 8  # four a worker: each takes as many as its threads (prefetch multiplier 1)
THREADS = 4
MODEL_PORT = 18765  # the fake model server's port on every node's loopback
CLUSTER_ENV = {
    "AGENTDESK_LEASE_SECONDS": "300",
    "AGENTDESK_REAPER_INTERVAL_SECONDS": "2",  # beat's reaper; 10 s in production
    "AGENTDESK_LLM_TIMEOUT_SECONDS": "30",
}


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    reason = netns.unavailable_reason() or services.unavailable_reason()
    if reason:
        pytest.skip(f"no network namespaces: {reason}")
    made = Cluster(nodes=("a", "b"))
    try:
        try:
            made.create()
        except subprocess.CalledProcessError as error:  # e.g. no bridge or veth in this kernel
            pytest.skip(f"network namespaces cannot be joined here: {error.cmd}: {error.stderr}")
        yield made
    finally:
        made.remove()


@pytest.fixture
def servers(cluster: Cluster) -> Iterator[Services]:
    # Under /tmp: PostgreSQL's socket path must stay short (about 100 bytes).
    root = Path(tempfile.mkdtemp(prefix="adk-cluster-"))
    started = Services(cluster, root, database=f"agentdesk_cluster_{os.getpid()}")
    try:
        yield started.start()
    finally:
        started.stop()


class Beat:
    """``celery -A config beat``: the cluster's one scheduler (its lease reaper)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.log = _log_dir() / f"beat-{uuid.uuid4().hex[:6]}.log"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "beat", "--loglevel", "INFO"],
            cwd=ROOT, env=env, stdout=self.log.open("ab"), stderr=subprocess.STDOUT,
        )  # fmt: skip

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(20)


def _node_env(servers: Services) -> dict[str, str]:
    environment = dict(os.environ)
    environment.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    environment.update(DJANGO_SETTINGS_MODULE="config.settings.test", PYTHONUNBUFFERED="1")
    return environment | servers.node_env() | CLUSTER_ENV


def _on(cluster: Cluster, node: str, start: Callable[[], Any]) -> Any:
    with cluster.inside(node):
        return start()


def _query(servers: Services, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(servers.local_conninfo()) as conn:  # the superuser: no RLS
        return conn.execute(sql, params).fetchall()


def _start_run(web: AsgiServer, agent: str, key: str) -> str:
    request = urllib.request.Request(
        f"{web.url}/api/v1/agents/{agent}/execute/",
        data=json.dumps({"input": "Note the call."}).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 202
        return str(json.load(response)["execution_id"])


RUNNING = "SELECT id::text, status FROM agents_execution WHERE NOT status = ANY(%s)"


def _second_calls(model_servers: list[FakeProviderServer], model: str) -> int:
    return sum(
        1
        for server in model_servers
        for request in server.requests_for(model)
        if request.assistant_turns == 1
    )


def _run_on(cluster: Cluster, node: str, env: dict[str, str], *args: str) -> str:
    """A command of the platform run to its end on ``node``; its output."""
    done = _on(cluster, node, lambda: subprocess.run(
        [sys.executable, *args], check=False, cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=600,
    ))  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return str(done.stdout)


@dataclass
class Nodes:
    workers: dict[str, Worker]
    web: AsgiServer
    model_servers: list[FakeProviderServer]


@contextmanager
def _nodes(cluster: Cluster, servers: Services, env: dict[str, str]) -> Iterator[Nodes]:
    """Each node's fake model server and worker, node a's web process and beat; started
    together, each from a thread inside its node; stopped at the end."""
    model_servers = [
        _on(cluster, node, lambda: FakeProviderServer(port=MODEL_PORT).start())
        for node in cluster.nodes
    ]
    workers = {node: Worker(concurrency=THREADS) for node in cluster.nodes}
    for worker in workers.values():
        worker.extra_env.update(servers.node_env() | CLUSTER_ENV)
    web = AsgiServer(**servers.node_env(), **CLUSTER_ENV)
    beat: Beat | None = None
    try:
        with ThreadPoolExecutor(len(workers) + 1) as pool:
            started = [pool.submit(_on, cluster, node, w.start) for node, w in workers.items()]
            started.append(pool.submit(_on, cluster, "a", web.start))
            for future in started:
                future.result()
        beat = _on(cluster, "a", lambda: Beat(env))
        yield Nodes(workers=workers, web=web, model_servers=model_servers)
    finally:
        for process in [beat, web, *workers.values()]:
            if process is not None:
                process.stop()
        for server in model_servers:
            server.stop()


def _holders(servers: Services, nodes: Nodes) -> dict[str, str | None]:
    """Each run's node now: from its lease owner, host:pid:thread (the namespaces share the
    host name; the pids tell). None: no lease, or another process."""
    pids = {str(w.process.pid): node for node, w in nodes.workers.items() if w.process}
    rows = _query(servers, "SELECT id::text, lease_owner FROM agents_execution")
    return {run: pids.get(owner.split(":")[1]) if owner else None for run, owner in rows}


def test_runs_spread_over_two_nodes_and_a_killed_nodes_runs_finish_on_the_other_once(
    cluster: Cluster, servers: Services
) -> None:
    env = _node_env(servers)
    _run_on(cluster, "a", env, "manage.py", "migrate", "--verbosity", "0")
    model = f"fake-{uuid.uuid4().hex[:10]}"
    seeded = _run_on(
        cluster, "a", env, "-m", "tests.cluster.seed", model, f"http://127.0.0.1:{MODEL_PORT}/v1"
    )
    agency = json.loads(seeded.strip().splitlines()[-1])
    note = tool_call_reply("crm_add_note", {"contact_id": agency["contact"], "content": "Call."})
    with _nodes(cluster, servers, env) as nodes:
        for server in nodes.model_servers:
            # Both calls take a while: the kill comes while every run waits for its second.
            server.set_responder(
                by_turn(
                    Reply(tool_calls=note.tool_calls, latency=1.5), Reply(text="Noted.", latency=4)
                ),
                key=model,
            )
        runs = _on(cluster, "a", lambda: [
            _start_run(nodes.web, agency["agent"], agency["key"]) for _ in range(RUNS)
        ])  # fmt: skip
        deadline = time.monotonic() + 180
        while _second_calls(nodes.model_servers, model) < RUNS:  # every note committed
            assert time.monotonic() < deadline, "the runs did not reach their second model call"
            time.sleep(0.1)
        held = _holders(servers, nodes)
        assert set(held) == set(runs)
        assert set(held.values()) == {"a", "b"}, held  # spread over both nodes

        nodes.workers["b"].kill()
        killed_at = time.monotonic()
        seen: dict[str, set[str | None]] = {run: set() for run in runs}
        deadline = time.monotonic() + 180
        while _query(servers, RUNNING, list(TERMINAL)):
            for run, node in _holders(servers, nodes).items():
                seen[run].add(node)
            assert time.monotonic() < deadline, _query(servers, RUNNING, list(TERMINAL))
            time.sleep(0.2)
        done_after = time.monotonic() - killed_at

    finished = dict(_query(servers, "SELECT id::text, attempts FROM agents_execution"))
    statuses = _query(servers, "SELECT DISTINCT status FROM agents_execution")
    assert statuses == [("completed",)]
    moved = {run for run, node in held.items() if node == "b"}
    for run in moved:
        assert "a" in seen[run], (run, seen[run])  # went on on node a
        assert finished[run] >= 2  # claimed on node b, then on node a
    lost = _query(
        servers,
        "SELECT DISTINCT execution_id::text FROM agents_statetransition"
        " WHERE transition_type = 'retry' AND triggered_by_event = 'worker_lost'",
    )
    assert {run for (run,) in lost} == moved
    notes = _query(
        servers, "SELECT count(*) FROM crm_note WHERE contact_id = %s", agency["contact"]
    )
    assert notes == [(RUNS,)]  # each run's side effect exactly once
    logger.warning(
        "many nodes: %d of %d runs moved from node b to node a; all done %.1f s after the kill",
        len(moved), RUNS, done_after,
    )  # fmt: skip
