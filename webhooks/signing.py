"""How a webhook delivery is signed (README "Webhooks"), for the receiver and for senders' tests.

A sender sends three headers with the raw JSON body:

- ``X-AgentDesk-Delivery``: its id for this delivery (1 to 200 of ``A-Z a-z 0-9 _ - :``), the
  same on every retry of it: a second delivery with an id already used starts nothing (409);
- ``X-AgentDesk-Timestamp``: the current Unix time in seconds; refused when more than
  ``AGENTDESK_WEBHOOK_TOLERANCE_SECONDS`` (300) away from the receiver's clock;
- ``X-AgentDesk-Signature``: ``sha256=`` and the lower-case hex HMAC-SHA256, keyed with the
  webhook's secret (the whole ``whsec_...`` string, as UTF-8), of
  ``<timestamp>.<delivery id>.<raw body>``.

The delivery id is signed too: with only the timestamp and body signed, a request caught on its way
could be sent again within the five minutes under a new delivery id and start a second run. No dots
in the id, so that the signed text splits one way only.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable

SIGNATURE_HEADER = "X-AgentDesk-Signature"
TIMESTAMP_HEADER = "X-AgentDesk-Timestamp"
DELIVERY_HEADER = "X-AgentDesk-Delivery"
SCHEME = "sha256"
MAX_DELIVERY_ID = 200
DELIVERY_ID = re.compile(r"[A-Za-z0-9_:\-]{1,%d}" % MAX_DELIVERY_ID)  # noqa: UP031 - a regex
TIMESTAMP = re.compile(r"[0-9]{1,12}")


def signed_content(*, timestamp: str, delivery_id: str, body: bytes) -> bytes:
    return f"{timestamp}.{delivery_id}.".encode() + body


def sign(*, secret: str, timestamp: str, delivery_id: str, body: bytes) -> str:
    """The ``X-AgentDesk-Signature`` value of a delivery."""
    content = signed_content(timestamp=timestamp, delivery_id=delivery_id, body=body)
    digest = hmac.new(secret.encode(), content, hashlib.sha256).hexdigest()
    return f"{SCHEME}={digest}"


def signature_matches(
    header: str, *, secrets: Iterable[str], timestamp: str, delivery_id: str, body: bytes
) -> bool:
    """Whether ``header`` is the signature of the delivery under any of ``secrets`` (compared in
    constant time)."""
    given = header.strip().encode()
    return any(
        hmac.compare_digest(
            given, sign(secret=s, timestamp=timestamp, delivery_id=delivery_id, body=body).encode()
        )
        for s in secrets
    )
