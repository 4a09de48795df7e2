"""Who a websocket acts as, and whether it still may: the same principals as the REST API
(core.api.principal), from the admin session, or from an API key in the handshake's
``Authorization: Bearer`` header or the client's first message. Never from the URL: a key there
would end up in access logs.

A socket outlives the request that authenticated it, so its credential is named before anything
is read (:class:`Credential`: the groups a revocation, a logout or a membership change is
published to, see :func:`core.realtime.credential_changed_on_commit`), the socket joins those
groups, and only then is the credential checked: a change committed after that check reaches
the socket as a message. :func:`recheck` tells, every so often, what no message announces (a
password changed elsewhere, a login deactivated, a session expired, a message lost while Redis
was down).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, load_backend
from django.utils.crypto import constant_time_compare
from rest_framework.exceptions import AuthenticationFailed

from core import realtime, tenancy
from core.api.authentication import api_key_authenticate
from core.api.principal import Principal, principal_for_key, principal_for_user
from core.api.throttling import BadCredentialThrottle
from core.models import Agency, User
from core.models.api_keys import ApiKey, parse_key

# (what changed: a ``core.realtime.CREDENTIAL_*``, the reason the client is told)
Verdict = tuple[str, str]


@dataclass(frozen=True)
class Credential:
    """What a socket authenticates with, as named before any database read: an API key (its
    visible prefix, which finds its row), or a session of a login."""

    api_key: str = field(default="", repr=False)  # the full key as the client sent it
    user_id: int | None = None
    session_key: str = field(default="", repr=False)

    @property
    def key_prefix(self) -> str:
        parsed = parse_key(self.api_key) if self.api_key else None
        return parsed[0] if parsed else ""

    def groups(self) -> list[str]:
        if self.api_key:
            prefix = self.key_prefix
            return [realtime.api_key_group(prefix)] if prefix else []
        groups = [realtime.login_group(self.user_id)] if self.user_id is not None else []
        if self.session_key:
            groups.append(realtime.session_group(self.session_key))
        return groups


def credential_for_handshake(scope: dict[str, Any]) -> Credential | None:
    """The session's or the handshake's key; None when the handshake carries neither (the
    client may still authenticate with its first message). Reads nothing: the session and its
    user were loaded by the middleware."""
    user = scope.get("user")
    if user is not None and user.is_authenticated:
        session = scope.get("session")
        return Credential(user_id=user.pk, session_key=getattr(session, "session_key", "") or "")
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            scheme, _, raw = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer":
                return Credential(api_key=raw.strip() or "-")  # "-": a key that cannot match
    return None


def authenticate(credential: Credential) -> Principal | None:
    """The principal ``credential`` acts as now, or None when it is not (or no longer) valid.
    A session is read again: it may have been logged out since the middleware loaded it."""
    if credential.api_key:
        try:
            return principal_for_key(api_key_authenticate(credential.api_key))
        except AuthenticationFailed:
            return None
    user = _session_user(credential)
    return principal_for_user(user) if user is not None else None


def authenticate_new(credential: Credential, address: str | None) -> Principal | None:
    """:func:`authenticate` for a socket that starts. An API key that fails counts against the
    client's address as the REST API's do (core.api.throttling), and an address with no failures
    left is refused before its key is read: ``Throttled``."""
    if not credential.api_key:
        return authenticate(credential)
    throttle = BadCredentialThrottle()
    throttle.refuse_address_if_exhausted(address)
    principal = authenticate(credential)
    if principal is None:
        throttle.record_address_failure(address)
    return principal


def _session_user(credential: Credential) -> User | None:
    """The session's login as Django's own check finds it (session present and not expired,
    its password hash still the login's, the login active), if it is still ``user_id``.

    Read only, unlike ``django.contrib.auth.get_user``, which flushes a session whose hash does
    not match and gives one that matches a fallback secret a new key: done from a socket, the
    browser holding the session would find itself logged out."""
    if not credential.session_key:
        return None
    store = import_module(settings.SESSION_ENGINE).SessionStore(credential.session_key)
    try:
        user_id = User._meta.pk.to_python(store[SESSION_KEY])
        backend_path = store[BACKEND_SESSION_KEY]
    except KeyError:  # logged out, expired, or never a login's
        return None
    if backend_path not in settings.AUTHENTICATION_BACKENDS:
        return None
    user = load_backend(backend_path).get_user(user_id)  # None: gone or deactivated
    if not isinstance(user, User) or user.pk != credential.user_id:
        return None
    session_hash = store.get(HASH_SESSION_KEY) or ""
    hashes = [user.get_session_auth_hash(), *user.get_session_auth_fallback_hash()]
    if not session_hash or not any(constant_time_compare(session_hash, h) for h in hashes):
        return None  # the password changed since this session logged in
    return user


def recheck(credential: Credential, principal: Principal) -> Verdict | None:
    """What changed since ``principal`` was resolved from ``credential``, or None: ended (a key
    revoked, expired or of an agency deactivated; a session gone or its login deactivated),
    removed (no agency any more) or role changed (any other change of rights)."""
    if credential.api_key:
        return _recheck_key(credential.key_prefix)
    user = _session_user(credential)
    if user is None:
        return realtime.CREDENTIAL_ENDED, "session ended"
    now = principal_for_user(user)
    if (now.agency_id, now.role, now.is_superuser) == (
        principal.agency_id,
        principal.role,
        principal.is_superuser,
    ):
        return None
    if now.agency_id is None and not now.is_superuser:
        return realtime.CREDENTIAL_REMOVED, "no longer a member of the agency"
    return realtime.CREDENTIAL_ROLE_CHANGED, "rights changed"


def _recheck_key(prefix: str) -> Verdict | None:
    with tenancy.api_key_lookup_context(prefix):
        key = ApiKey.objects.filter(prefix=prefix).first()
    if key is None or key.is_revoked:
        return realtime.CREDENTIAL_ENDED, "API key revoked"
    if key.is_expired():
        return realtime.CREDENTIAL_ENDED, "API key expired"
    with tenancy.agency_context(key.agency_id):
        if not Agency.objects.filter(pk=key.agency_id, is_active=True).exists():
            return realtime.CREDENTIAL_ENDED, "the key's agency is not active"
    return None


def session_logged_out(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    """``user_logged_out``: the sockets that session opened close once the logout commits.
    (Django's ``logout()`` sends it before it flushes the session, so the key is the old one.)"""
    session_key = getattr(getattr(request, "session", None), "session_key", None)
    if session_key:
        realtime.credential_changed_on_commit(
            [realtime.session_group(session_key)],
            change=realtime.CREDENTIAL_ENDED,
            reason="logged out",
        )


# What a saved login or agency may have changed that a socket's credential depends on.
_LOGIN_FIELDS = frozenset({"is_active", "password"})
_AGENCY_FIELDS = frozenset({"is_active"})


def _may_have_changed(fields: frozenset[str], update_fields: Any, created: bool) -> bool:
    return not created and (update_fields is None or bool(fields & set(update_fields)))


def login_saved(
    sender: Any, instance: User, created: bool, update_fields: Any, **kwargs: Any
) -> None:
    """``post_save`` of a login: its sockets read their credential again once the save commits
    (a login deactivated ends them; a password changed ends the sessions it logged out, not
    the one that changed it). A login's own ``last_login`` write tells nobody."""
    if _may_have_changed(_LOGIN_FIELDS, update_fields, created):
        realtime.credential_recheck_on_commit(
            [realtime.login_group(instance.pk)], reason="login changed"
        )


def agency_saved(
    sender: Any, instance: Agency, created: bool, update_fields: Any, **kwargs: Any
) -> None:
    """``post_save`` of an agency: every socket watching it (keys and sessions alike) reads its
    credential again once the save commits (a deactivated agency ends them)."""
    if _may_have_changed(_AGENCY_FIELDS, update_fields, created):
        realtime.credential_recheck_on_commit(
            [realtime.agency_credentials_group(instance.pk)], reason="agency changed"
        )


def agency_if_exists(agency_id: uuid.UUID) -> uuid.UUID | None:
    """For a superuser naming the agency to watch."""
    with tenancy.platform_context():
        return agency_id if Agency.objects.filter(pk=agency_id).exists() else None
