"""Who an A2A request acts as (protocols/a2a/auth.py): a key's requests count against its burst
rate, shared with its REST requests, and past it the key is refused with 429 while another key
goes through; a revoked key is refused (end to end over HTTP: tests/protocols/test_a2a.py)."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.conf import settings
from django.test import override_settings
from rest_framework.test import APIClient

from core import tenancy
from core.api_keys.services import api_key_create, api_key_revoke
from core.models import Role
from protocols.a2a.auth import Refusal, key_for
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
        return api_key_create(agency_id=agency.id, name="a2a", role=Role.STAFF)[1]


def _address() -> str:
    return str(uuid.uuid4())  # a client address of its own: counters no other test touches


# Windows of a day: a test cannot straddle a window's end.
def test_a_key_past_its_burst_rate_shared_with_the_rest_api_is_refused_with_429() -> None:
    key, address = _key(), _address()
    with rates(api_burst="2/day"):
        assert key_for(key, address).prefix in key
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
        assert client.get("/api/v1/agents/").status_code == 200  # the second request
        with pytest.raises(Refusal) as refused:
            key_for(key, address)
        assert (refused.value.status, refused.value.code) == (429, "throttled")
        assert refused.value.retry_after is not None
        assert 1 <= refused.value.retry_after <= 86400
        assert key_for(_key(), address)  # another key: its own counters


def test_a_revoked_key_is_refused_with_401() -> None:
    key = _key()
    found = key_for(key, _address())
    with tenancy.agency_context(found.agency_id):
        api_key_revoke(api_key=found)
    with pytest.raises(Refusal) as refused:
        key_for(key, _address())
    assert (refused.value.status, refused.value.message) == (401, "This API key has been revoked.")
