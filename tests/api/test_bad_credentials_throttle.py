"""Guessing API keys and user tokens: failed credentials count per client address; past the limit
the address gets 429 (the API's error shape, Retry-After) for any credential, a valid one too,
until the window ends, while other addresses go on."""

from __future__ import annotations

import uuid
from typing import Any

from rest_framework.test import APIClient

from core.models import Role
from tests.api.conftest import new_key, token_client
from tests.api.test_throttling import assert_throttled, rates

URL = "/api/v1/agents/"
LIMIT = 5


def address() -> str:
    """An address of this test's own: the counters live in Redis for the whole test run."""
    n = uuid.uuid4().int
    return f"10.{n % 250}.{(n >> 8) % 250}.{(n >> 16) % 250 + 1}"


def bearer(key: str, client_address: str) -> APIClient:
    client = APIClient(REMOTE_ADDR=client_address)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def bogus_key() -> str:
    return f"adk_{uuid.uuid4().hex[:8]}_{uuid.uuid4().hex}"


def get(client: APIClient) -> Any:
    return client.get(URL)


# Windows of a day: a test cannot straddle a window's end.
def test_an_address_guessing_keys_gets_429_then_even_for_a_valid_key(tenant_a) -> None:
    guesser, other = address(), address()
    valid = new_key(tenant_a.agency, Role.STAFF)
    with rates(api_bad_credentials=f"{LIMIT}/day"):
        for _ in range(LIMIT):
            response = get(bearer(bogus_key(), guesser))
            assert response.status_code == 401
            assert response.json()["code"] == "authentication_failed"

        assert_throttled(get(bearer(bogus_key(), guesser)), at_most=86400)
        # Refused before the key is looked at: a right guess would not be confirmed either.
        assert_throttled(get(bearer(valid, guesser)), at_most=86400)
        # Another address is not affected, with a bad key or a good one.
        assert get(bearer(bogus_key(), other)).status_code == 401
        assert get(bearer(valid, other)).status_code == 200


def test_valid_keys_do_not_count(tenant_a) -> None:
    client_address = address()
    valid = new_key(tenant_a.agency, Role.STAFF)
    with rates(api_bad_credentials=f"{LIMIT}/day"):
        for _ in range(LIMIT * 2):
            assert get(bearer(valid, client_address)).status_code == 200
        assert get(bearer(bogus_key(), client_address)).status_code == 401


def test_revoked_keys_and_bogus_user_tokens_count_too(tenant_a) -> None:
    guesser = address()
    user = tenant_a.users[Role.STAFF]
    good_token = token_client(user)
    good_token.defaults["REMOTE_ADDR"] = guesser
    with rates(api_bad_credentials=f"{LIMIT}/day"):
        for n in range(LIMIT):
            client = APIClient(REMOTE_ADDR=guesser)
            if n % 2:
                client.credentials(HTTP_AUTHORIZATION=f"Token {uuid.uuid4().hex}")
            else:
                client.credentials(HTTP_AUTHORIZATION="Bearer not-a-key-at-all")
            assert get(client).status_code == 401

        assert_throttled(get(good_token), at_most=86400)
