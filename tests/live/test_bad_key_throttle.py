"""Guessing API keys over websockets: a key that fails on a socket counts against the client's
address with the REST API's failures, and an address past the limit is closed with 4429 before
its key is looked at, a valid one too; other addresses go on."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from core import tenancy
from core.api_keys.services import api_key_create
from core.models import Role
from live import protocol
from tests.factories import AgencyFactory
from tests.live.helpers import Received, read_until
from tests.processes import AsgiServer

pytestmark = pytest.mark.slow

LIMIT = 3


@pytest.fixture(scope="module")
def server(django_db_setup: None) -> Iterator[AsgiServer]:
    started = AsgiServer(AGENTDESK_API_BAD_CREDENTIALS_RATE=f"{LIMIT}/day").start()
    yield started
    started.stop()


def address() -> str:
    n = uuid.uuid4().int
    return f"10.{n % 250}.{(n >> 8) % 250}.{(n >> 16) % 250 + 1}"


def watch_agency(server: AsgiServer, key: str, forwarded_for: str) -> Received:
    """A dashboard socket with ``key``, from ``forwarded_for`` (uvicorn believes the header from
    127.0.0.1): what it receives until it is ready or closed."""
    headers = {"Authorization": f"Bearer {key}", "X-Forwarded-For": forwarded_for}
    with connect(f"{server.ws_url}/ws/agency/", additional_headers=headers, open_timeout=10) as ws:
        return read_until(ws, lambda m: m["type"] == "ready")


def bogus_key() -> str:
    return f"adk_{uuid.uuid4().hex[:8]}_{uuid.uuid4().hex}"


def test_an_address_guessing_keys_on_sockets_is_closed_with_4429(
    server: AsgiServer, live_db: Any
) -> None:
    agency = AgencyFactory.create()
    with tenancy.agency_context(agency.id):
        _key, valid = api_key_create(agency_id=agency.id, name="watcher", role=Role.STAFF)
    guesser, other = address(), address()
    for _ in range(LIMIT):
        assert (
            watch_agency(server, bogus_key(), guesser).close_code == protocol.CLOSE_UNAUTHENTICATED
        )

    assert watch_agency(server, bogus_key(), guesser).close_code == protocol.CLOSE_THROTTLED
    assert watch_agency(server, valid, guesser).close_code == protocol.CLOSE_THROTTLED
    # One count for REST and sockets: the same address is refused over REST too.
    rest = httpx.get(
        f"{server.url}/api/v1/agents/",
        headers={"Authorization": f"Bearer {valid}", "X-Forwarded-For": guesser},
        timeout=30,
    )
    assert rest.status_code == 429
    assert rest.json()["code"] == "throttled"
    # Another address is not affected.
    ready = watch_agency(server, valid, other)
    assert ready.close_code is None
    assert ready.messages[-1]["type"] == "ready"
