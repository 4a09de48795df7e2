"""``Idempotency-Key`` for API writes that start something (``POST /agents/{id}/execute``).

A client that does not know whether its request went through (a timeout, a dropped
connection) sends it again with the same key and gets the first answer back, status and body,
instead of a second run. The same key with a different request (another body or another agent)
is a 422: it is a client bug, not a retry.

Keys belong to one credential of one agency (an API key, or a user), so two clients cannot
collide or read each other's answers; they are kept for ``AGENTDESK_IDEMPOTENCY_KEY_HOURS``
(24 h by default), after which the key may be used again.

Concurrency is settled by the database, not a cache: the first request inserts its row inside
the request's transaction; a second one with the same key blocks on the unique index until the
first commits, then finds the row (with the answer) and replays it. Only successful answers are
kept: a refused request (400, 409...) writes nothing, and may be retried with the same key.
"""

from __future__ import annotations

import datetime
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter

from core.exceptions import ApplicationError
from core.models import IdempotencyRecord
from core.models.idempotency import MAX_KEY_LENGTH

HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
# What idempotency_key_from takes, stated for clients: printable ASCII, no space at either end
# (HTTP strips those), 1 to MAX_KEY_LENGTH characters.
KEY_PATTERN = rf"^[!-~](?:[ -~]{{0,{MAX_KEY_LENGTH - 2}}}[!-~])?$"

SCHEMA_PARAMETER = OpenApiParameter(
    HEADER,
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=False,
    pattern=KEY_PATTERN,
    description=(
        "Makes the request safe to retry: the same key (1-255 printable ASCII characters, e.g. "
        "a UUID) with the same request returns the first answer again (status and body, with "
        f"`{REPLAYED_HEADER}: true`) instead of starting a second run; the same key with a "
        "different request is a 422. Keys are per credential (API key or user) and kept for "
        "24 hours (`AGENTDESK_IDEMPOTENCY_KEY_HOURS`)."
    ),
)


@dataclass(frozen=True)
class Replay:
    status: int
    body: Any


def credential_of(principal: Any) -> str:
    """Whose keys these are: the API key's, else the user's (a :class:`Principal`)."""
    if principal.api_key is not None:
        return f"key:{principal.api_key.pk}"
    return f"user:{principal.user_id}"


def idempotency_key_from(headers: Any) -> str | None:
    """The request's key, None without one; a malformed one is a 400."""
    raw = headers.get(HEADER)
    if raw is None:
        return None
    key = str(raw).strip()
    if not key or len(key) > MAX_KEY_LENGTH or not all(" " <= c <= "~" for c in key):
        raise ApplicationError(
            "invalid",
            f"The {HEADER} header must be 1 to {MAX_KEY_LENGTH} printable ASCII characters.",
        )
    return key


def request_hash(*, method: str, path: str, body: Any) -> str:
    canonical = json.dumps(
        {"method": method.upper(), "path": path, "body": body},
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def _live(*, agency_id: Any, credential: str, key: str) -> IdempotencyRecord | None:
    return IdempotencyRecord.objects.filter(
        agency_id=agency_id, credential=credential, key=key, expires_at__gt=timezone.now()
    ).first()


def _replay(record: IdempotencyRecord, fingerprint: str) -> Replay:
    if record.request_hash != fingerprint:
        raise ApplicationError(
            "idempotency_key_reused",
            f"This {HEADER} was already used for a different request; use a new key.",
            status=422,
        )
    return Replay(record.response_status, json.loads(record.response_body))


def idempotent_call(
    *,
    agency_id: Any,
    credential: str,
    key: str,
    fingerprint: str,
    call: Callable[[], tuple[int, Any]],
) -> tuple[int, Any, bool]:
    """``call()``'s ``(status, body)`` once per key; ``(status, body, replayed)``.

    A successful (2xx) answer is stored with the key in the caller's transaction; anything else
    stores nothing. Precondition: in the agency's context, inside a transaction (the request's)
    that commits the call's writes and the stored answer together.
    """
    existing = _live(agency_id=agency_id, credential=credential, key=key)
    if existing is not None:
        replay = _replay(existing, fingerprint)
        return replay.status, replay.body, True
    now = timezone.now()
    # An expired row of the same key is gone before the insert (its unique slot is reused).
    IdempotencyRecord.objects.filter(
        agency_id=agency_id, credential=credential, key=key, expires_at__lte=now
    ).delete()
    try:
        with transaction.atomic():
            # Claims the key: a concurrent request with it waits here until this one commits.
            record = IdempotencyRecord.objects.create(
                agency_id=agency_id,
                credential=credential,
                key=key,
                request_hash=fingerprint,
                response_status=0,
                response_body="",
                expires_at=now + datetime.timedelta(hours=settings.AGENTDESK_IDEMPOTENCY_KEY_HOURS),
            )
    except IntegrityError:
        # Another request with the key committed first: its answer is the answer.
        existing = _live(agency_id=agency_id, credential=credential, key=key)
        if existing is None:  # expired meanwhile and not yet deleted: rare, worth a retry
            raise ApplicationError(
                "idempotency_key_busy",
                f"A request with this {HEADER} was being processed; try again.",
                status=409,
            ) from None
        replay = _replay(existing, fingerprint)
        return replay.status, replay.body, True
    status, body = call()
    if 200 <= status < 300:
        record.response_status = status
        record.response_body = json.dumps(body, default=str)
        record.save(update_fields=["response_status", "response_body", "updated_at"])
    else:
        record.delete()
    return status, body, False


def purge_expired_idempotency_records(*, batch_size: int = 1000) -> int:
    """Delete expired records (every agency). Precondition: in the platform context."""
    deleted = 0
    while True:
        ids = list(
            IdempotencyRecord.objects.filter(expires_at__lte=timezone.now()).values_list(
                "pk", flat=True
            )[:batch_size]
        )
        if not ids:
            return deleted
        deleted += IdempotencyRecord.objects.filter(pk__in=ids).delete()[0]
