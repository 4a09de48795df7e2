"""A page whose client hangs up mid-request ends its own work before Django closes the request's
database connections (issue 25, item 1; core.asgi.ASGIHandler).

Without it, Django's ``request_finished`` ran ``close_old_connections`` on the request's thread
while TenantMiddleware's transaction was still open there (the thread waits in async_to_sync for
the middlewares inside it): the connection went back to the pool inside the transaction, psycopg's
pool logged "rolling back returned connection ... INTRANS", and the view's next query answered 500
("Cannot open a new connection in an atomic block"), seen by nobody but the log. A browser does
this whenever someone clicks on before a page has loaded; 124 of 300 such requests did it."""

from __future__ import annotations

import random
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from django.test import Client

from core.models import User
from tests.factories import UserFactory
from tests.processes import AsgiServer

ABANDONED = 60
# Pages that query in the tenant transaction after their first query (lists, counts, filters).
PAGES = ("/admin/", "/admin/agents/execution/", "/approvals/", "/live/waiting-count/")


@pytest.fixture
def server(django_db_setup: None) -> Iterator[AsgiServer]:
    started = AsgiServer().start()
    yield started
    started.stop()


def _abandon(server: AsgiServer, path: str, session: str, after: float) -> None:
    """GET ``path`` and hang up ``after`` seconds later, without reading the answer."""
    request = (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
        f"Cookie: sessionid={session}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(request.encode())
        time.sleep(after)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")


@pytest.mark.slow
def test_a_request_whose_client_hangs_up_ends_cleanly_and_gives_its_connection_back_after(
    live_db: None, server: AsgiServer
) -> None:
    admin: User = UserFactory.create(is_superuser=True)
    client = Client()
    client.force_login(admin)
    session = client.cookies["sessionid"].value
    chance = random.Random(25)

    for number in range(ABANDONED):
        _abandon(server, PAGES[number % len(PAGES)], session, after=chance.uniform(0, 0.08))

    # It still answers the pages in full once the abandoned requests' views have finished (on a
    # busy machine that takes a while, and the pool answers 503 while every connection is
    # theirs); a connection that never came back would keep it answering 503.
    page = urllib.request.Request(
        f"{server.url}/admin/", headers={"Cookie": f"sessionid={session}"}
    )
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(page, timeout=60) as response:
                assert response.status == 200
                break
        except urllib.error.HTTPError as error:
            if error.code != 503 or time.monotonic() > deadline:
                raise
            time.sleep(1)

    log = server.output()
    assert "Internal Server Error" not in log, log[-4000:]
    assert "INTRANS" not in log, log[-4000:]
