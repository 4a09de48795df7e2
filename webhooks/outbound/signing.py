"""The Standard Webhooks signature (https://www.standardwebhooks.com, v1), for outbound deliveries.

Three headers go with the raw JSON body:

- ``webhook-id``: the message id (``msg_...``), the same on every attempt of a delivery;
- ``webhook-timestamp``: the attempt's Unix time in seconds;
- ``webhook-signature``: ``v1,<base64 HMAC-SHA256>`` of ``<id>.<timestamp>.<body>``, keyed with
  the secret's bytes (the base64 after ``whsec_``); during a rotation's overlap one per secret,
  space-separated (a receiver accepts the delivery if any one matches).

Written out (ten lines of :mod:`hmac`) rather than taken from the ``standardwebhooks`` package:
the tests verify these signatures with that package, the specification's reference code, and
with the specification's test vector.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Iterable

SECRET_PREFIX = "whsec_"  # noqa: S105 - a prefix, not a secret
SECRET_BYTES = 32  # the specification: between 24 and 64


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def _key(secret: str) -> bytes:
    return base64.b64decode(secret.removeprefix(SECRET_PREFIX))


def sign(*, secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """One ``v1,<signature>`` of the message under ``secret`` (``whsec_<base64>``)."""
    content = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(_key(secret), content, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def headers(
    *, secrets: Iterable[str], message_id: str, timestamp: int, body: bytes
) -> dict[str, str]:
    """The three Standard Webhooks headers of one attempt, signed with each of ``secrets``."""
    signatures = " ".join(
        sign(secret=s, message_id=message_id, timestamp=timestamp, body=body) for s in secrets
    )
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signatures,
    }
