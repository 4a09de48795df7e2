"""The login lockout under the real ASGI server (Django's async middleware path, as `manage.py up`
serves the admin): the rows are committed for the server to see (live_db)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.core.test_login_throttle import LIMIT, LOGIN, PASSWORD, address, member
from tests.processes import AsgiServer


@pytest.fixture(scope="module")
def throttled_server(django_db_setup: None) -> Iterator[AsgiServer]:
    server = AsgiServer(AGENTDESK_LOGIN_FAILURE_LIMIT=str(LIMIT)).start()
    yield server
    server.stop()


def asgi_attempt(server: AsgiServer, username: str, password: str, *, forwarded_for: str) -> Any:
    """A login through the real server; uvicorn takes the client's address from
    X-Forwarded-For when the connection comes from a proxy it trusts (127.0.0.1 by default)."""
    headers = {"X-Forwarded-For": forwarded_for}
    with httpx.Client(base_url=server.url, headers=headers, timeout=30) as client:
        form = client.get(LOGIN)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
        assert token is not None, form.text[:1000]
        data = {"username": username, "password": password, "next": "/admin/"}
        return client.post(LOGIN, data={**data, "csrfmiddlewaretoken": token.group(1)})


@pytest.mark.slow
def test_the_lockout_holds_under_the_asgi_server(
    throttled_server: AsgiServer, live_db: Any
) -> None:
    user = member()
    for n in range(LIMIT):
        asgi_attempt(throttled_server, user.username, f"guess-{n}", forwarded_for=address())

    refused = asgi_attempt(throttled_server, user.username, PASSWORD, forwarded_for=address())

    assert refused.status_code == 429
    assert 'id="login-locked-out"' in refused.text
    assert 0 < int(refused.headers["Retry-After"]) <= 15 * 60
    assert "sessionid" not in refused.cookies
    other = member()
    welcome = asgi_attempt(throttled_server, other.username, PASSWORD, forwarded_for=address())
    assert welcome.status_code == 302
