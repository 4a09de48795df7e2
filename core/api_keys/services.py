"""Writers for API keys."""

from __future__ import annotations

import datetime
import uuid

from django.db import IntegrityError, transaction
from django.utils import timezone

from core.api_keys.models import ApiKey, format_key, hash_secret, new_prefix, new_secret
from core.exceptions import ApplicationError
from core.models import Role

# last_used_at is a hint for humans: one write a minute per key is plenty.
TOUCH_INTERVAL = datetime.timedelta(minutes=1)


def api_key_create(
    *, agency_id: uuid.UUID, name: str, role: str = Role.STAFF, created_by_id: int | None = None
) -> tuple[ApiKey, str]:
    """Create a key; returns the row and the full key, which exists only in this return value.

    Precondition: in the agency's context.
    """
    name = name.strip()
    if not name:
        raise ApplicationError("invalid", "The key needs a name.", fields={"name": ["Required."]})
    if role not in Role.values:
        raise ApplicationError("invalid", "Unknown role.", fields={"role": ["Unknown role."]})
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
                )
        except IntegrityError:
            continue  # a prefix collision (2^32 space): draw again
        return key, format_key(prefix, secret)
    raise ApplicationError("unavailable", "Could not allocate a key prefix.", status=503)


def api_key_revoke(*, api_key: ApiKey) -> ApiKey:
    """Revoke a key (idempotent); it is refused from the next request on. Precondition: in the
    key's agency context."""
    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at", "updated_at"])
    return api_key


def api_key_touch(*, api_key: ApiKey) -> None:
    """Record that the key was used (at most once a minute). Precondition: agency context."""
    now = timezone.now()
    if api_key.last_used_at is None or now - api_key.last_used_at > TOUCH_INTERVAL:
        ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)
        api_key.last_used_at = now
