"""Per-webhook throttling: every delivery to one webhook counts, accepted or refused, so that one
sender (or someone who found the URL) cannot flood an agent, its trigger log or the platform.

Scope ``webhook`` in ``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]``
(``AGENTDESK_WEBHOOK_THROTTLE_RATE``, default ``120/min``), counted in Redis like the API's
limits (:mod:`core.api.throttling`).
"""

from __future__ import annotations

import uuid
from typing import Any

from core.api.throttling import WindowRateThrottle

SCOPE = "webhook"


class WebhookRateThrottle(WindowRateThrottle):
    """Keyed by the webhook's id, not by the caller: a delivery carries no credential."""

    scope = SCOPE

    def __init__(self, webhook_id: uuid.UUID) -> None:
        super().__init__()
        self.webhook_id = webhook_id

    def get_cache_key(self, request: Any, view: Any) -> str:
        return f"throttle:{self.scope}:{self.webhook_id}"

    def check(self) -> float | None:
        """None when the delivery may go on, else the seconds to wait (``Retry-After``)."""
        if self.allow_request(None, None):  # type: ignore[arg-type] # keyed without a request
            return None
        return self.wait()
