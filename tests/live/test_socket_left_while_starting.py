"""A socket whose client leaves while it still starts (accepted, its credential being read) ends
like any other: its credential task stops and it leaves its groups. It used to keep both for as
long as the web process ran, a database read a minute each and the consumer held in memory
(found by the soak: three of four staff pages' agency sockets, bench/README.md "Soak")."""

from __future__ import annotations

import time

import pytest
import redis
from django.conf import settings

from core import realtime
from core.models import Role
from tests.agents.factories import AgentFactory
from tests.factories import MembershipFactory
from tests.live.helpers import open_socket, session_cookie
from tests.processes import AsgiServer

pytestmark = pytest.mark.slow
SOCKETS = 5


def _web_subscribers(group: str) -> int:
    """Subscriptions to the channel layer's Redis channel of ``group``: the web process holds
    one while any of its sockets is in the group (channels_redis' pub/sub layer)."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    [(_, count)] = client.pubsub_numsub(f"asgi__group__{group}")
    return int(count)


def test_agency_sockets_closed_while_starting_leave_their_groups(
    asgi_server: AsgiServer, live_db: None
) -> None:
    agent = AgentFactory.create()
    user = MembershipFactory.create(agency=agent.agency, role=Role.VIEWER).user
    group = realtime.login_group(user.pk)  # joined first, before the credential is read

    for _ in range(SOCKETS):
        socket = open_socket(asgi_server, "/ws/agency/", cookie=session_cookie(user))
        socket.close()  # at once: the server is still reading the session's login

    deadline = time.monotonic() + 30
    while _web_subscribers(group) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _web_subscribers(group) == 0
