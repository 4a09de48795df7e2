"""API throttling: per API key (or per user, for token and session logins), counted in Redis.

Two limits apply to every authenticated request (``REST_FRAMEWORK["DEFAULT_THROTTLE_CLASSES"]``):

- scope ``api_burst`` (default ``120/min``, ``AGENTDESK_API_THROTTLE_BURST``): a short spike;
- scope ``api_sustained`` (default ``5000/hour``, ``AGENTDESK_API_THROTTLE_SUSTAINED``): the
  steady pace over an hour.

Each credential has its own counters, so one client cannot starve its agency's other keys or
the platform. Past a limit the request is refused with 429, ``Retry-After`` (seconds until the
limit's window ends) and the API's error shape. Rates read ``"<n>/<s|min|hour|day>"``.

Counters are fixed windows (one Redis ``INCR`` per limit and request, atomic across processes),
not DRF's default request history (a list of timestamps read and written whole on every request,
which races between processes and grows with the rate). When the cache cannot be reached the
request goes through (fails open) and a warning is logged: an outage of the counters must not
take the API down with it.

Other throttles (the per-webhook one) subclass :class:`WindowRateThrottle` with their own scope
and key, their rate in the same ``DEFAULT_THROTTLE_RATES`` dictionary.

Guessing is limited apart from use: credentials that fail (a bogus, revoked or expired API key
or user token) count per client address, scope ``api_bad_credentials`` (default ``20/min``,
``AGENTDESK_API_BAD_CREDENTIALS_RATE``); an address past it gets 429 for any credential until the
window ends, before the credential is looked at (:class:`BadCredentialThrottle`).
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

from django.core.cache import cache as default_cache
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from core.client import client_address

logger = logging.getLogger(__name__)

BURST_SCOPE = "api_burst"
BAD_CREDENTIALS_SCOPE = "api_bad_credentials"
SUSTAINED_SCOPE = "api_sustained"

# One warning per this many seconds while the cache is unreachable, not one per request.
_WARN_EVERY_SECONDS = 60.0
_last_warning = 0.0


def _warn_unavailable(scope: str, exc: Exception) -> None:
    global _last_warning  # noqa: PLW0603 - a process-wide log limiter
    now = time.monotonic()
    if now - _last_warning >= _WARN_EVERY_SECONDS:
        _last_warning = now
        logger.warning(
            "API throttling off until the cache answers again (scope %s: %s: %s)",
            scope,
            type(exc).__name__,
            exc,
        )


def credential_ident(request: Request) -> str | None:
    """Whose counters a request counts against: its API key, else its user; None (not
    throttled here) for anonymous requests, which the permission check refuses first."""
    auth = request.auth
    prefix = getattr(auth, "prefix", None)  # an ApiKey (not imported: keeps this module light)
    if prefix is not None:
        return f"key:{auth.pk}"
    user = request.user
    if user is not None and user.is_authenticated:
        return f"user:{user.pk}"
    return None


class WindowRateThrottle(SimpleRateThrottle):
    """A fixed-window counter per ``get_cache_key`` in the Django cache (Redis).

    The rate is read from the settings on each request (DRF's own reads them once, at import),
    so ``override_settings`` and an edited environment apply without a restart of the class.
    """

    cache = default_cache
    # Set by SimpleRateThrottle.__init__ from the rate (the type stubs leave them out).
    num_requests: int
    duration: int
    now: float
    window_end: float

    def get_rate(self) -> str | None:
        rates: dict[str, Any] = api_settings.DEFAULT_THROTTLE_RATES
        if self.scope not in rates:
            return super().get_rate()  # ImproperlyConfigured, with DRF's message
        rate = rates[self.scope]
        return None if rate is None else str(rate)

    def parse_rate(self, rate: str | None) -> tuple[Any, Any]:  # (None, None): no limit
        if rate is None:
            return (None, None)
        num, period = rate.split("/")
        seconds = {"s": 1, "m": 60, "h": 3600, "d": 86400}[period.strip()[0]]
        return int(num), seconds

    def allow_request(self, request: Request, view: Any) -> bool:
        if self.rate is None:
            return True
        ident = self.get_cache_key(request, view)
        if ident is None:
            return True
        key = self._window_key(ident)
        try:
            count = self._increment(key)
        except Exception as exc:  # any cache failure (Redis down, timeout): fail open, logged
            _warn_unavailable(str(self.scope), exc)
            return True
        return count <= self.num_requests

    def _window_key(self, ident: str) -> str:
        """The counter of ``ident`` for the window now (sets ``now`` and ``window_end``)."""
        self.now = self.timer()
        window = int(self.now // self.duration)
        self.window_end = (window + 1) * self.duration
        return f"{ident}:{window}"

    def _increment(self, key: str) -> int:
        # The window's key lives a little past the window, then Redis drops it.
        timeout = self.duration + 1
        if self.cache.add(key, 1, timeout):
            return 1
        try:
            return int(self.cache.incr(key))
        except ValueError:  # expired between add and incr: a new window
            self.cache.add(key, 1, timeout)
            return 1

    def wait(self) -> float:
        """Seconds until this limit's window ends (``Retry-After``)."""
        return max(1.0, float(math.ceil(self.window_end - self.now)))


class _CredentialThrottle(WindowRateThrottle):
    def get_cache_key(self, request: Request, view: Any) -> str | None:
        ident = credential_ident(request)
        return None if ident is None else f"throttle:{self.scope}:{ident}"


class BurstRateThrottle(_CredentialThrottle):
    scope = BURST_SCOPE


class SustainedRateThrottle(_CredentialThrottle):
    scope = SUSTAINED_SCOPE


class BadCredentialThrottle(WindowRateThrottle):
    """Failed API credentials per client address (``core.client.client_address``).

    Not a DRF throttle class of views (those run after authentication, which a bad credential
    never passes): the authentication classes call :meth:`refuse_if_exhausted` before they look a
    credential up, and :meth:`record_failure` when it fails.
    """

    scope = BAD_CREDENTIALS_SCOPE

    def get_cache_key(self, request: Request, view: Any) -> str:
        return self._address_key(client_address(request))

    def _address_key(self, address: str | None) -> str:
        return f"throttle:{self.scope}:ip:{address or 'unknown'}"

    def refuse_if_exhausted(self, request: Request) -> None:
        """``Throttled`` (429, ``Retry-After``) when the address has no failures left."""
        self.refuse_address_if_exhausted(client_address(request))

    def record_failure(self, request: Request) -> None:
        self.record_address_failure(client_address(request))

    def refuse_address_if_exhausted(self, address: str | None) -> None:
        """The same for a client known by its address only (a websocket's)."""
        if self.rate is None:
            return
        key = self._window_key(self._address_key(address))
        try:
            failures = int(self.cache.get(key, 0))
        except Exception as exc:  # any cache failure: fail open, logged
            _warn_unavailable(str(self.scope), exc)
            return
        if failures >= self.num_requests:
            raise exceptions.Throttled(wait=self.wait())

    def record_address_failure(self, address: str | None) -> None:
        if self.rate is None:
            return
        key = self._window_key(self._address_key(address))
        try:
            self._increment(key)
        except Exception as exc:
            _warn_unavailable(str(self.scope), exc)
