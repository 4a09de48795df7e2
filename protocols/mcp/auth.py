"""Who an MCP request acts as: the API key in its ``Authorization: Bearer`` or ``X-API-Key``
header, checked on every HTTP request (a revoked key stops working at the next one), as the REST
API checks it, failures and rates counted with the API's (protocols.keys).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from protocols.keys import Refusal, key_for


@dataclass(frozen=True)
class Caller:
    """An authenticated MCP client: the key's agency and role (never from request input)."""

    agency_id: uuid.UUID
    role: str
    key_prefix: str = field(repr=True)


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
    try:
        key = key_for(raw, address)
    except Refusal as refusal:
        return refusal
    return Caller(agency_id=key.agency_id, role=key.role, key_prefix=key.prefix)
