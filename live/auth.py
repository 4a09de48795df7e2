"""Who a websocket acts as: the same principals as the REST API (core.api.principal), from the
admin session, or from an API key in the handshake's ``Authorization: Bearer`` header or the
client's first message. Never from the URL: a key there would end up in access logs."""

from __future__ import annotations

import uuid
from typing import Any

from rest_framework.exceptions import AuthenticationFailed

from core import tenancy
from core.api.authentication import api_key_authenticate
from core.api.principal import Principal, principal_for_user
from core.api.principal import principal_for_key as _principal_for_key
from core.models import Agency


def principal_for_handshake(scope: dict[str, Any]) -> Principal | None:
    """The principal of a session or of a key in the handshake's headers; None when the
    handshake carries neither (the client may still authenticate with its first message).
    A key there that does not authenticate raises ``AuthenticationFailed``."""
    user = scope.get("user")
    if user is not None and user.is_authenticated:
        return principal_for_user(user)
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            scheme, _, raw = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer":
                return _principal_for_key(api_key_authenticate(raw.strip()))
    return None


def principal_for_key(raw: str) -> Principal | None:
    try:
        return _principal_for_key(api_key_authenticate(raw))
    except AuthenticationFailed:
        return None


def agency_if_exists(agency_id: uuid.UUID) -> uuid.UUID | None:
    """For a superuser naming the agency to watch."""
    with tenancy.platform_context():
        return agency_id if Agency.objects.filter(pk=agency_id).exists() else None
