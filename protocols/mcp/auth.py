"""Who an MCP request acts as: the API key in its ``Authorization: Bearer`` or ``X-API-Key``
header, checked on every HTTP request (a revoked key stops working at the next one), as the REST
API checks it (:func:`core.api.authentication.api_key_authenticate`). A key that fails counts
against the client's address like the API's, and an address with no failures left is refused
before its key is read (:class:`core.api.throttling.BadCredentialThrottle`); a good key's
requests count against its burst and sustained rates, shared with its REST requests.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import SimpleNamespace

from rest_framework import exceptions

from core.api.authentication import api_key_authenticate
from core.api.throttling import (
    BadCredentialThrottle,
    BurstRateThrottle,
    SustainedRateThrottle,
    WindowRateThrottle,
)


@dataclass(frozen=True)
class Caller:
    """An authenticated MCP client: the key's agency and role (never from request input)."""

    agency_id: uuid.UUID
    role: str
    key_prefix: str = field(repr=True)


@dataclass(frozen=True)
class Refusal:
    """Why a request is refused: the HTTP status, an error code and a message for the client."""

    status: int
    code: str
    message: str
    retry_after: int | None = None


MISSING = Refusal(
    401,
    "not_authenticated",
    "An API key is required: send it as 'Authorization: Bearer adk_...' or 'X-API-Key: adk_...'.",
)


def credential_from(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The API key the request names (``Authorization: Bearer`` first, else ``X-API-Key``);
    ``""`` for a header present but not usable, ``None`` when neither is sent."""
    bearer: str | None = None
    x_api_key: str | None = None
    for name, value in headers:
        if name == b"authorization":
            scheme, _, raw = value.decode("latin-1").partition(" ")
            bearer = raw.strip() if scheme.lower() == "bearer" else ""
        elif name == b"x-api-key":
            x_api_key = value.decode("latin-1").strip()
    return bearer if bearer is not None else x_api_key


def authenticate(raw: str, address: str | None) -> Caller | Refusal:
    """The caller ``raw`` authenticates, else the refusal (sync: the endpoint calls it in a
    worker thread)."""
    throttle = BadCredentialThrottle()
    try:
        throttle.refuse_address_if_exhausted(address)
        try:
            key = api_key_authenticate(raw)
        except exceptions.AuthenticationFailed as exc:
            throttle.record_address_failure(address)
            return Refusal(401, "authentication_failed", str(exc.detail))
    except exceptions.Throttled as exc:
        seconds = getattr(exc, "wait", None)  # DRF sets it; its stubs do not know it
        wait = int(seconds) if seconds is not None else None
        return Refusal(429, "throttled", str(exc.detail), retry_after=wait)
    # The key's request rates, on the counters its REST requests count against too.
    counted = SimpleNamespace(auth=key, user=None)
    for limit in (BurstRateThrottle(), SustainedRateThrottle()):
        if not limit.allow_request(counted, None):  # type: ignore[arg-type]  # what it reads
            return _throttled(limit)
    return Caller(agency_id=key.agency_id, role=key.role, key_prefix=key.prefix)


def _throttled(limit: WindowRateThrottle) -> Refusal:
    wait = int(limit.wait())
    return Refusal(
        429, "throttled", f"Request was throttled. Expected available in {wait} seconds.", wait
    )
