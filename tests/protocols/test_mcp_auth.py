"""Who an MCP request acts as (protocols/mcp/auth.py): the key's header, and the REST API's
limits on it: a key past its rate, shared with its REST requests, and an address past its failed
keys are refused with 429 (end to end over HTTP: tests/protocols/test_mcp_server.py)."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.conf import settings
from django.test import override_settings

from core import tenancy
from core.api_keys.services import api_key_create
from core.models import Role
from protocols.mcp.auth import Caller, Refusal, authenticate, credential_from
from tests.factories import AgencyFactory

pytestmark = pytest.mark.django_db


@contextmanager
def rates(**scopes: str) -> Iterator[None]:
    rest = copy.deepcopy(settings.REST_FRAMEWORK)
    rest["DEFAULT_THROTTLE_RATES"].update(scopes)
    with override_settings(REST_FRAMEWORK=rest):
        yield


def _key() -> str:
    agency = AgencyFactory.create()
    with tenancy.agency_context(agency.id):
        return api_key_create(agency_id=agency.id, name="mcp", role=Role.STAFF)[1]


def _address() -> str:
    return str(uuid.uuid4())  # a client address of its own: counters no other test touches


def test_the_key_is_read_from_the_bearer_or_the_x_api_key_header() -> None:
    assert credential_from([(b"authorization", b"Bearer adk_x_y")]) == "adk_x_y"
    assert credential_from([(b"x-api-key", b" adk_x_y ")]) == "adk_x_y"
    assert credential_from([(b"authorization", b"Bearer a"), (b"x-api-key", b"b")]) == "a"
    assert credential_from([(b"authorization", b"Basic dXNlcg==")]) == ""  # not usable
    assert credential_from([(b"cookie", b"sessionid=1")]) is None


# Windows of a day: a test cannot straddle a window's end.
def test_a_key_past_its_burst_rate_is_refused_with_429() -> None:
    key, address = _key(), _address()
    with rates(api_burst="2/day"):
        assert isinstance(authenticate(key, address), Caller)
        assert isinstance(authenticate(key, address), Caller)
        refused = authenticate(key, address)
        assert isinstance(refused, Refusal)
        assert refused.status == 429
        assert refused.code == "throttled"
        assert refused.retry_after is not None
        assert 1 <= refused.retry_after <= 86400
        assert f"in {refused.retry_after} seconds" in refused.message
        assert isinstance(authenticate(_key(), address), Caller)  # another key: its own counters


def test_an_address_past_its_failed_keys_is_refused_before_its_key_is_read() -> None:
    address = _address()
    with rates(api_bad_credentials="2/day"):
        for _ in range(2):
            failed = authenticate("adk_0000000000000000_nope", address)
            assert isinstance(failed, Refusal)
            assert (failed.status, failed.message) == (401, "Invalid API key.")
        refused = authenticate(_key(), address)  # even a good key now
        assert isinstance(refused, Refusal)
        assert refused.status == 429
