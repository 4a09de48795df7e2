"""A request that follows another on the same keep-alive connection gets its pooled database
connection back into the pool (issue 25, item 1; core/asgi.py).

Uvicorn starts the next request on a connection from inside the previous request's task, so,
without core.asgi.IsolatedContext, that request inherits the previous one's context: Django ran
it on the previous request's executor thread and closed its connections on another thread, and
each such request leaked a pooled connection until the pool was empty and pages answered 503.
Pipelined requests take that path every time (a browser gets there when it sends its next request
as soon as a static file's body is in, before the server's final empty body message)."""

from __future__ import annotations

import re
import socket
import time
import urllib.request
from collections.abc import Iterator

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from core.models import User
from tests.factories import UserFactory
from tests.processes import AsgiServer

POOL_MAX = 4
PAIRS = POOL_MAX * 2  # more than the pool holds: every leak would show as a 503
SampleKey = tuple[str, frozenset[tuple[str, str]]]
STATUS = re.compile(rb"^HTTP/1\.1 (\d{3}) ", re.MULTILINE)


@pytest.fixture
def small_pool_server(django_db_setup: None) -> Iterator[AsgiServer]:
    server = AsgiServer(
        DATABASE_POOL_MIN_SIZE="1",
        DATABASE_POOL_MAX_SIZE=str(POOL_MAX),
        DATABASE_POOL_TIMEOUT="2",
    ).start()
    yield server
    server.stop()


def _samples(server: AsgiServer) -> dict[SampleKey, float]:
    with urllib.request.urlopen(f"{server.url}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _pipelined(server: AsgiServer, session: str) -> list[int]:
    """A static file, then the admin's home (session, tenant transaction, queries), sent
    together on one connection; the statuses of both answers."""
    host = f"127.0.0.1:{server.port}"
    requests = (
        f"GET /static/live/live.css HTTP/1.1\r\nHost: {host}\r\n\r\n"
        f"GET /admin/ HTTP/1.1\r\nHost: {host}\r\nCookie: sessionid={session}\r\n"
        "Connection: close\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(requests.encode())
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return [int(status) for status in STATUS.findall(received)]


@pytest.mark.slow
def test_requests_that_follow_another_on_a_connection_give_their_connection_back(
    live_db: None, small_pool_server: AsgiServer
) -> None:
    admin: User = UserFactory.create(is_superuser=True)
    client = Client()
    client.force_login(admin)
    session = client.cookies["sessionid"].value
    replaced: SampleKey = ("agentdesk_db_pool_replacements_total", frozenset())
    replaced_before = _samples(small_pool_server)[replaced]

    statuses = [_pipelined(small_pool_server, session) for _ in range(PAIRS)]

    assert statuses == [[200, 200]] * PAIRS, small_pool_server.output()[-3000:]
    in_use: SampleKey = ("agentdesk_db_pool_connections", frozenset({("state", "in_use")}))
    deadline = time.monotonic() + 30
    samples = _samples(small_pool_server)
    while samples[in_use] > 0 and time.monotonic() < deadline:
        time.sleep(0.2)  # a request's last step (its connection given back) may still be on
        samples = _samples(small_pool_server)
    assert samples[in_use] == 0
    assert samples[replaced] == replaced_before
