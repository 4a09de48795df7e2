"""An API key presented to an MCP or A2A endpoint, checked as the REST API checks it
(:func:`core.api.authentication.api_key_authenticate`: revoked, expired, inactive agency). A key
that fails counts against the client's address like the API's, and an address with no failures
left is refused before its key is read (:class:`core.api.throttling.BadCredentialThrottle`); a
good key's requests count against its burst and sustained rates, shared with its REST requests."""

from __future__ import annotations

from types import SimpleNamespace

from rest_framework.exceptions import AuthenticationFailed, Throttled

from core.api.authentication import api_key_authenticate
from core.api.throttling import BadCredentialThrottle, BurstRateThrottle, SustainedRateThrottle
from core.models.api_keys import ApiKey


class Refusal(Exception):
    """An HTTP refusal before any protocol message: ``status``, and the API's error ``code``
    and ``message``."""

    def __init__(
        self, status: int, code: str, message: str, retry_after: int | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after


def key_for(raw: str, address: str | None) -> ApiKey:
    """The usable key ``raw``, its request counted against the key's burst and sustained
    rates (the counters its REST requests count against); else a :class:`Refusal` (sync: the
    endpoints call it in a worker thread)."""
    throttle = BadCredentialThrottle()
    try:
        throttle.refuse_address_if_exhausted(address)
    except Throttled as throttled:
        raise Refusal(429, "throttled", str(throttled.detail), int(throttle.wait())) from None
    try:
        key = api_key_authenticate(raw)
    except AuthenticationFailed as failed:
        throttle.record_address_failure(address)
        raise Refusal(401, "authentication_failed", str(failed.detail)) from None
    counted = SimpleNamespace(auth=key, user=None)  # what the throttles read of a request
    for limit in (BurstRateThrottle(), SustainedRateThrottle()):
        if not limit.allow_request(counted, None):  # type: ignore[arg-type]
            wait = int(limit.wait())
            message = f"Request was throttled. Expected available in {wait} seconds."
            raise Refusal(429, "throttled", message, wait)
    return key
