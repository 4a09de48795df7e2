"""The embedded services and `manage.py up`, run as real subprocesses on a private data folder."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from devkit import embedded

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(
        AGENTDESK_DATA_DIR=str(data_dir),
        DJANGO_SETTINGS_MODULE="config.settings.dev",
        PYTHONUNBUFFERED="1",
    )
    return env


def _processes_using(data_dir: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if str(data_dir) in cmdline:
            found.append(proc)
    return found


def _stop_embedded(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTDESK_DATA_DIR", str(data_dir))
    embedded.stop()


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """Not under pytest's tmp_path: PostgreSQL runs as another user when tests run as root, and
    every pytest session that starts meanwhile (`make test` runs two) makes /tmp/pytest-of-<user>
    private again: the server then cannot reach its files, and fails to start or to stop."""
    folder = Path(tempfile.mkdtemp(prefix="agentdesk-up-")) / "data"
    yield folder
    shutil.rmtree(folder.parent, ignore_errors=True)


def test_two_processes_starting_at_once_get_one_postgres_and_one_redis(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = (
        "from devkit import embedded; s = embedded.ensure_running();"
        " print(s.postgres_pid, s.redis_pid, s.redis_port)"
    )
    try:
        starters = [
            subprocess.Popen(
                [sys.executable, "-c", code],
                cwd=ROOT,
                env=_env(data_dir),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        outputs = [p.communicate(timeout=120) for p in starters]
        assert [p.returncode for p in starters] == [0, 0], outputs
        first, second = (out.strip() for out, _ in outputs)
        assert first == second
        postmasters = [
            p
            for p in _processes_using(data_dir)
            if p.name() == "postgres"
            and p.ppid() not in {q.pid for q in _processes_using(data_dir)}
        ]
        redis_servers = [p for p in _processes_using(data_dir) if "redis" in p.name()]
        assert len(postmasters) == 1
        assert len(redis_servers) <= 1  # redis-server's argv shows its address, not the folder
        monkeypatch.setenv("AGENTDESK_DATA_DIR", str(data_dir))
        pids = embedded.running_pids()
        assert pids["postgres"] == postmasters[0].pid
        assert pids["redis"] == int(first.split()[1])
        assert psutil.Process(pids["redis"]).is_running()
    finally:
        _stop_embedded(data_dir, monkeypatch)
    assert embedded.running_pids() == {"postgres": None, "redis": None}


def test_up_serves_health_admin_and_a_demo_run_and_sigterm_leaves_nothing_behind(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = embedded.free_port()
    # A file, not a pipe: nobody reads a pipe until `up` ends, and a full one would stall it.
    log = data_dir.parent / "up.log"
    with log.open("wb") as out_file:
        up = subprocess.Popen(
            [sys.executable, "manage.py", "up", "--port", str(port), "--concurrency", "2"],
            cwd=ROOT,
            env=_env(data_dir),
            stdout=out_file,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        # A first start creates and migrates the database: minutes on a loaded machine.
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and up.poll() is None:
            if "AgentDesk is running" in log.read_text():
                break
            time.sleep(0.2)
        assert "AgentDesk is running" in log.read_text(), log.read_text()[-3000:]
        # Said only once the platform is healthy (it was said when the port opened, with the
        # worker still starting: /healthz answered 503 then).
        health = httpx.get(f"{base}/healthz", timeout=5)
        assert health.status_code == 200, health.text
        assert health.json()["down"] == []
        assert set(health.json()["checks"]) == {"database", "redis", "celery"}

        with httpx.Client(base_url=base, timeout=10) as client:
            login = client.get("/admin/login/")
            assert login.status_code == 200
            assert "Username" in login.text
            # The demo login printed by `up` works.
            response = client.post(
                "/admin/login/",
                data={
                    "username": "demo",
                    "password": "demo-agentdesk",
                    "csrfmiddlewaretoken": client.cookies["csrftoken"],
                    "next": "/admin/",
                },
            )
            assert response.status_code == 302
            assert client.get("/admin/").status_code == 200
            # The demo model runs in `up` itself, on a loopback port of its own.
            demo_port = _listening_ports(up.pid)[0]
            assert httpx.get(f"http://127.0.0.1:{demo_port}/healthz").status_code == 200
            _demo_run_waits_for_approval_then_completes(client, base)

        children = psutil.Process(up.pid).children(recursive=True)
        assert len(children) >= 3
        embedded_pids = [pid for pid in _embedded_pids(data_dir, monkeypatch) if pid]
        assert len(embedded_pids) == 2

        up.send_signal(signal.SIGTERM)
        up.wait(90)
        out = log.read_text()
        assert up.returncode == 0, out
        assert "demo login: demo / demo-agentdesk (agency admin)" in out
        assert "approver login: approver / demo-agentdesk (decides approvals)" in out
        assert f"demo model (scripted, no AI) listening on http://127.0.0.1:{demo_port}/v1" in out
        assert "demo model stopped" in out
        # The approved e-mail, as the development mail backend logs it: one readable line.
        sent = "e-mail (not sent: development mail backend) to priya.raman@northwind-traders."
        mailed = [line for line in out.splitlines() if sent in line]
        assert len(mailed) == 1, out
        assert "INFO core.mail" in mailed[0]
        assert "celery.redirected" not in out
        # Beat's lease reaper ran every 10 s without a line per run.
        assert "Task agents.reap_expired_leases[" not in out
        assert "Sending due task reap-expired-leases" not in out
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{demo_port}/healthz", timeout=2)
        assert f"{base}/admin/" in out
        for line in ("web stopped", "worker stopped", "beat stopped", "embedded PostgreSQL"):
            assert line in out
        time.sleep(0.5)
        assert [c.pid for c in children if _alive(c)] == []
        assert [pid for pid in embedded_pids if psutil.pid_exists(pid) and _alive_pid(pid)] == []
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
        _stop_embedded(data_dir, monkeypatch)


def _listening_ports(pid: int) -> list[int]:
    connections = psutil.Process(pid).net_connections(kind="tcp")
    return [c.laddr.port for c in connections if c.status == psutil.CONN_LISTEN]


def _login(base: str, username: str) -> httpx.Client:
    client = httpx.Client(base_url=base, timeout=10)
    client.get("/admin/login/")
    response = client.post(
        "/admin/login/",
        data={
            "username": username,
            "password": "demo-agentdesk",
            "csrfmiddlewaretoken": client.cookies["csrftoken"],
            "next": "/admin/",
        },
    )
    assert response.status_code == 302, response.text
    client.headers["X-CSRFToken"] = client.cookies["csrftoken"]
    return client


def _poll(
    client: httpx.Client, url: str, statuses: set[str], timeout: float = 60
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        body = client.get(url).json()
        if body["status"] in statuses or time.monotonic() > deadline:
            return body
        time.sleep(0.3)


def _demo_run_waits_for_approval_then_completes(admin: httpx.Client, base: str) -> None:
    """What the README walks a newcomer through: run the SDR agent on the demo model, see it
    call tools and wait for an approval, approve as the approver, see it finish."""
    admin.headers["X-CSRFToken"] = admin.cookies["csrftoken"]
    agents = admin.get("/api/v1/agents/", params={"page_size": 100}).json()["results"]
    sdr = next(agent for agent in agents if agent["slug"] == "sdr-agent")
    started = admin.post(
        f"/api/v1/agents/{sdr['id']}/execute/",
        json={"input": "Reach out to Priya Raman about her pricing question."},
    )
    assert started.status_code == 202, started.text
    url = f"/api/v1/executions/{started.json()['execution_id']}/"
    run = _poll(admin, url, {"waiting_approval", "completed", "failed", "cancelled"})
    assert run["status"] == "waiting_approval", run
    tools = [step["tool_name"] for step in run["steps"] if step["tool_name"]]
    assert tools[:3] == ["crm_search_contacts", "crm_get_contact", "crm_add_note"], tools

    approver = _login(base, "approver")
    try:
        pending = approver.get(
            "/api/v1/approvals/", params={"status": "pending", "execution": run["id"]}
        ).json()["results"]
        assert [a["action_type"] for a in pending] == ["email_send"]
        decided = approver.post(
            f"/api/v1/approvals/{pending[0]['id']}/decide/", json={"decision": "approve"}
        )
        assert decided.status_code == 200, decided.text
    finally:
        approver.close()
    run = _poll(admin, url, {"completed", "failed", "cancelled"})
    assert run["status"] == "completed", run
    assert "approved" in run["output"]


def _embedded_pids(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> list[int | None]:
    monkeypatch.setenv("AGENTDESK_DATA_DIR", str(data_dir))
    try:
        return list(embedded.running_pids().values())
    finally:
        monkeypatch.delenv("AGENTDESK_DATA_DIR")


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _alive_pid(pid: int) -> bool:
    try:
        return _alive(psutil.Process(pid))
    except psutil.NoSuchProcess:
        return False
