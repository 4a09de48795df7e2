"""A worker's own ``/metrics`` (``AGENTDESK_METRICS_PORT``, ops/metrics/pod_server.py): where
pods share no samples directory with a web process (deploy/kubernetes), each worker pod serves
its own, to the clients the web's ``/metrics`` admits, without the web's scrape-time gauges."""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings
from prometheus_client.parser import text_string_to_metric_families

from ops.metrics import pod_server
from tests.processes import Worker


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _call(path: str = "/metrics", method: str = "GET", **headers: str) -> tuple[str, str]:
    """The WSGI application as a server calls it: (status, body)."""
    environ: dict[str, Any] = {
        "PATH_INFO": path,
        "REQUEST_METHOD": method,
        "REMOTE_ADDR": headers.pop("address", "127.0.0.1"),
        **{f"HTTP_{name.upper()}": value for name, value in headers.items()},
    }
    answered: list[str] = []
    body: Iterable[bytes] = pod_server.application(
        environ, lambda status, _headers: answered.append(status)
    )
    return answered[0], b"".join(body).decode()


@override_settings(AGENTDESK_METRICS_TOKEN="s3cret", AGENTDESK_METRICS_ALLOWED_IPS=["127.0.0.1"])
def test_the_pod_server_admits_the_clients_the_web_scrape_admits() -> None:
    assert _call(authorization="Bearer s3cret")[0] == "200 OK"
    assert _call(authorization="Bearer wrong")[0] == "401 Unauthorized"
    assert _call()[0] == "200 OK"  # an allowed address, no token presented
    # Elsewhere, with a token set: 401 (the token would do).
    assert _call(address="10.1.2.3")[0] == "401 Unauthorized"
    assert _call(path="/admin/")[0] == "404 Not Found"
    assert _call(method="POST", authorization="Bearer s3cret")[0] == "405 Method Not Allowed"
    with override_settings(AGENTDESK_METRICS_TOKEN=""):
        assert _call()[0] == "200 OK"
        assert _call(address="10.1.2.3")[0] == "403 Forbidden"


def test_the_pod_server_is_off_without_a_port() -> None:
    assert pod_server.start(port=0) is None


@pytest.mark.slow
def test_a_worker_with_a_metrics_port_serves_its_own_samples_without_the_web_gauges(
    django_db_setup: None, tmp_path: Path
) -> None:
    port = _free_port()
    directory = tmp_path / "prometheus"
    directory.mkdir()
    worker = Worker(
        queue=f"pod-metrics-{port}",
        concurrency=2,
        AGENTDESK_METRICS_PORT=str(port),
        PROMETHEUS_MULTIPROC_DIR=str(directory),
    ).start()
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                    status, text = r.status, r.read().decode()
                break
            except urllib.error.URLError:
                assert time.monotonic() < deadline, worker.output()[-3000:]
                time.sleep(0.2)
    finally:
        worker.stop()
    assert status == 200
    names = {family.name for family in text_string_to_metric_families(text)}
    # The worker's own samples (its deliveries gauge, written when the worker imports the
    # metrics), from the directory only this worker writes to.
    assert "agentdesk_run_deliveries_in_progress" in names
    assert any(path.name.endswith(".db") for path in directory.iterdir())
    # Read at scrape time by the web alone: a pod does not report them again.
    assert not names & {"agentdesk_queue_depth", "agentdesk_scrape_source_up"}
