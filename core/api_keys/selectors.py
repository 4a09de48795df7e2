"""Reads of API keys."""

from __future__ import annotations

import hmac

from core import tenancy
from core.models.api_keys import ApiKey, hash_secret, parse_key


def api_key_for_secret(*, raw_key: str) -> ApiKey | None:
    """The key row ``raw_key`` names when its secret matches, revoked or not; else None.

    Runs before any tenant is known: only the row with the key's prefix is visible meanwhile.
    """
    parsed = parse_key(raw_key)
    if parsed is None:
        return None
    prefix, secret = parsed
    with tenancy.api_key_lookup_context(prefix):
        key = ApiKey.objects.filter(prefix=prefix).first()
    if key is None or not hmac.compare_digest(key.secret_hash, hash_secret(secret)):
        return None
    return key
