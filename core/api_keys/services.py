"""Writers for API keys."""

from __future__ import annotations

import datetime
import uuid

from django.db import IntegrityError, transaction
from django.utils import timezone

from core import realtime
from core.exceptions import ApplicationError
from core.models import Role
from core.models.api_keys import ApiKey, format_key, hash_secret, new_prefix, new_secret

# last_used_at is a hint for humans: one write a minute per key is plenty.
TOUCH_INTERVAL = datetime.timedelta(minutes=1)


def api_key_create(
    *,
    agency_id: uuid.UUID,
    name: str,
    role: str = Role.STAFF,
    created_by_id: int | None = None,
    expires_at: datetime.datetime | None = None,
) -> tuple[ApiKey, str]:
    """Create a key; returns the row and the full key, which exists only in this return value.
    ``expires_at``: refused from then on (None: never expires); it must be in the future.

    Precondition: in the agency's context.
    """
    name = name.strip()
    if not name:
        raise ApplicationError("invalid", "The key needs a name.", fields={"name": ["Required."]})
    if len(name) > ApiKey._meta.get_field("name").max_length:  # type: ignore[operator]
        raise ApplicationError(
            "invalid", "The name is too long.", fields={"name": ["At most 200 characters."]}
        )
    if role not in Role.values:
        raise ApplicationError("invalid", "Unknown role.", fields={"role": ["Unknown role."]})
    if expires_at is not None and (timezone.is_naive(expires_at) or expires_at <= timezone.now()):
        raise ApplicationError(
            "invalid",
            "The expiry must be an aware date and time in the future.",
            fields={"expires_at": ["Must be in the future."]},
            status=422,  # a well-formed date, in the past: the schema cannot say "future"
        )
    for _attempt in range(5):
        prefix, secret = new_prefix(), new_secret()
        try:
            with transaction.atomic():
                key = ApiKey.objects.create(
                    agency_id=agency_id,
                    name=name,
                    role=role,
                    prefix=prefix,
                    secret_hash=hash_secret(secret),
                    created_by_id=created_by_id,
                    expires_at=expires_at,
                )
        except IntegrityError:
            continue  # a prefix collision (2^32 space): draw again
        return key, format_key(prefix, secret)
    raise ApplicationError("unavailable", "Could not allocate a key prefix.", status=503)


def api_key_revoke(*, api_key: ApiKey) -> ApiKey:
    """Revoke a key (idempotent); it is refused from the next request on, and the sockets it
    opened close once the revocation commits. Precondition: in the key's agency context."""
    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at", "updated_at"])
        realtime.credential_changed_on_commit(
            [realtime.api_key_group(api_key.prefix)],
            change=realtime.CREDENTIAL_ENDED,
            reason="API key revoked",
        )
    return api_key


def api_key_touch(*, api_key: ApiKey) -> None:
    """Record that the key was used (at most once a minute). Precondition: agency context."""
    now = timezone.now()
    if api_key.last_used_at is None or now - api_key.last_used_at > TOUCH_INTERVAL:
        ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)
        api_key.last_used_at = now
