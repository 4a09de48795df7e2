"""API-key authentication (``Authorization: Bearer adk_<prefix>_<secret>``).

User tokens (``Authorization: Token ...``) and admin sessions use DRF's classes; whichever
authenticates, :mod:`core.api.principal` turns the result into the agency and role the request
acts with. A key or token that fails counts against the client's address, and an address with
too many failures is refused (429) before its credential is looked up
(:class:`core.api.throttling.BadCredentialThrottle`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.contrib.auth.models import AnonymousUser
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from core import tenancy
from core.api.throttling import BadCredentialThrottle
from core.api_keys.selectors import api_key_for_secret
from core.api_keys.services import api_key_touch
from core.models import Agency
from core.models.api_keys import KEY_SCHEME, ApiKey


class ApiKeyUser(AnonymousUser):
    """``request.user`` of an API-key request: authenticated, but no login of any person."""

    def __init__(self, api_key: ApiKey) -> None:
        super().__init__()
        self.api_key = api_key

    @property
    def is_anonymous(self) -> bool:  # type: ignore[override]
        return False

    @property
    def is_authenticated(self) -> bool:  # type: ignore[override]
        return True

    def __str__(self) -> str:
        return f"API key {self.api_key.prefix}"


class ApiKeyAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[ApiKeyUser, ApiKey] | None:
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        with counted_failures(request):
            if len(header) != 2:
                raise exceptions.AuthenticationFailed("Invalid Authorization header.")
            try:
                raw = header[1].decode("ascii")
            except UnicodeDecodeError:
                raise exceptions.AuthenticationFailed("Invalid API key.") from None
            key = api_key_authenticate(raw)
        return ApiKeyUser(key), key

    def authenticate_header(self, request: Any) -> str:
        return f'{self.keyword} realm="api"'


class UserTokenAuthentication(authentication.TokenAuthentication):
    """DRF's user tokens (``Authorization: Token <key>``), their failures counted like keys'."""

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        with counted_failures(request):
            return super().authenticate(request)


@contextmanager
def counted_failures(request: Request) -> Iterator[None]:
    """Refuse an address out of failures (429); count the credential checked inside if it
    fails (``AuthenticationFailed``)."""
    throttle = BadCredentialThrottle()
    throttle.refuse_if_exhausted(request)
    try:
        yield
    except exceptions.AuthenticationFailed:
        throttle.record_failure(request)
        raise


def api_key_authenticate(raw: str) -> ApiKey:
    """The usable key ``raw`` names (REST requests and websockets alike), marked as used; else
    :class:`~rest_framework.exceptions.AuthenticationFailed` saying why."""
    key = api_key_for_secret(raw_key=raw) if raw.startswith(f"{KEY_SCHEME}_") else None
    if key is None:
        raise exceptions.AuthenticationFailed("Invalid API key.")
    if key.is_revoked:
        raise exceptions.AuthenticationFailed("This API key has been revoked.")
    if key.is_expired():
        raise exceptions.AuthenticationFailed("This API key has expired.")
    with tenancy.agency_context(key.agency_id):
        if not Agency.objects.filter(pk=key.agency_id, is_active=True).exists():
            raise exceptions.AuthenticationFailed("The key's agency is not active.")
        api_key_touch(api_key=key)
    return key
