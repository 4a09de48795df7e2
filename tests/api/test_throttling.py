"""Throttling per API key and per user: 429 with Retry-After in the error shape, counters of one
credential only, and a cache outage that lets requests through."""

from __future__ import annotations

import copy
import logging
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

from core.models import Role
from tests.api.conftest import key_client, token_client

URL = "/api/v1/agents/"


@contextmanager
def rates(**scopes: str) -> Iterator[None]:
    """REST_FRAMEWORK with these throttle rates (DRF reloads its settings on the change)."""
    rest = copy.deepcopy(settings.REST_FRAMEWORK)
    rest["DEFAULT_THROTTLE_RATES"].update(scopes)
    with override_settings(REST_FRAMEWORK=rest):
        yield


def assert_throttled(response: Any, *, at_most: int) -> int:
    assert response.status_code == 429, response.content
    body = response.json()
    assert set(body) == {"message", "code", "extra"}
    assert body["code"] == "throttled"
    retry_after = int(response["Retry-After"])
    assert 1 <= retry_after <= at_most
    assert body["extra"] == {"retry_after": retry_after}
    assert f"{retry_after} s" in body["message"]
    return retry_after


# Windows of a day: a test cannot straddle a window's end (a minute's might, and pass wrongly).
def test_a_key_past_its_burst_gets_429_and_others_are_unaffected(tenant_a, tenant_b) -> None:
    with rates(api_burst="3/day"):
        busy = key_client(tenant_a.agency)
        for _ in range(3):
            assert busy.get(URL).status_code == 200
        assert_throttled(busy.get(URL), at_most=86400)
        assert_throttled(busy.post(URL, {}, format="json"), at_most=86400)  # writes too
        # Another key of the same agency, and another agency's key, have their own counters.
        assert key_client(tenant_a.agency).get(URL).status_code == 200
        assert key_client(tenant_b.agency).get(URL).status_code == 200


def test_the_sustained_limit_applies_on_its_own(tenant_a) -> None:
    with rates(api_burst="1000/min", api_sustained="2/hour"):
        client = key_client(tenant_a.agency, Role.VIEWER)
        assert client.get(URL).status_code == 200
        assert client.get(URL).status_code == 200
        assert_throttled(client.get(URL), at_most=3600)


def test_users_are_throttled_per_user(tenant_a) -> None:
    with rates(api_burst="2/day"):
        staff = token_client(tenant_a.users[Role.STAFF])
        assert staff.get(URL).status_code == 200
        assert staff.get(URL).status_code == 200
        assert_throttled(staff.get(URL), at_most=86400)
        # The same person logged in to the admin counts against the same user.
        staff.credentials()
        staff.force_login(tenant_a.users[Role.STAFF])
        assert_throttled(staff.get(URL), at_most=86400)
        assert token_client(tenant_a.users[Role.VIEWER]).get(URL).status_code == 200


def test_anonymous_requests_are_refused_before_counting(tenant_a) -> None:
    from rest_framework.test import APIClient

    with rates(api_burst="1/day"):
        for _ in range(3):
            assert APIClient().get(URL).status_code == 401


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_cache_lets_requests_through_and_warns(tenant_a, caplog) -> None:
    from core.api import throttling

    down = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{_closed_port()}/0",
            "OPTIONS": {"socket_connect_timeout": 0.2, "socket_timeout": 0.2},
        }
    }
    throttling._last_warning = 0.0
    with rates(api_burst="1/day"), override_settings(CACHES=down):
        client = key_client(tenant_a.agency)
        with caplog.at_level(logging.WARNING, logger="core.api.throttling"):
            for _ in range(3):
                assert client.get(URL).status_code == 200
    assert "API throttling off until the cache answers again" in caplog.text
    assert caplog.text.count("API throttling off") == 1  # once, not per request


@pytest.mark.parametrize("rate", ["3/day", "3/d"])
def test_rates_are_read_per_request(tenant_a, rate) -> None:
    client = key_client(tenant_a.agency)
    with rates(api_burst=rate):
        for _ in range(3):
            client.get(URL)
        assert client.get(URL).status_code == 429
    with rates(api_burst="1000/day"):
        assert client.get(URL).status_code == 200
