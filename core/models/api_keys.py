"""Per-agency API keys: shown once at creation, stored as a hash, revocable.

A key reads ``adk_<prefix>_<secret>``. The prefix is visible (lists, admin, logs) and unique, so
a request's key is found by its prefix; only the SHA-256 of the secret is stored. SHA-256 rather
than a slow password hash is enough because the secret is 257 random bits, not a human password.
"""

from __future__ import annotations

import datetime
import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone

from core.models.tenancy import AgencyOwnedModel, Role
from core.tokens import readable_secret

KEY_SCHEME = "adk"
PREFIX_BYTES = 4  # 8 hex characters
# The admin flags keys that expire within this many days.
EXPIRY_WARNING_DAYS = 14


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def new_prefix() -> str:
    return secrets.token_hex(PREFIX_BYTES)


def new_secret() -> str:
    # Base58, easy to copy by eye; keys made before (token_urlsafe: l and I, '-' and '_') stay
    # valid: only the secret's hash is compared.
    return readable_secret()


def format_key(prefix: str, secret: str) -> str:
    return f"{KEY_SCHEME}_{prefix}_{secret}"


def parse_key(raw: str) -> tuple[str, str] | None:
    """``(prefix, secret)`` of a well-formed key, else None. The secret may contain ``_``."""
    parts = raw.strip().split("_", 2)
    if len(parts) != 3 or parts[0] != KEY_SCHEME:
        return None
    prefix, secret = parts[1], parts[2]
    if len(prefix) != PREFIX_BYTES * 2 or not secret or len(secret) > 200:
        return None
    return prefix, secret


class ApiKey(AgencyOwnedModel):
    """A machine credential of one agency, acting with the rights of ``role``.

    Row-level security: the agency policy, plus a SELECT-only policy that shows the single row
    whose prefix :func:`core.tenancy.api_key_lookup_context` names, so that authentication can
    find a key before any tenant is set.
    """

    name = models.CharField(max_length=200)
    prefix = models.CharField(max_length=16, unique=True, editable=False)
    secret_hash = models.CharField(max_length=64, editable=False)
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.STAFF)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    last_used_at = models.DateTimeField(
        null=True, blank=True, help_text="Updated at most once a minute."
    )
    revoked_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Refused from this moment on, like a revoked key. Empty: never expires.",
    )

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(role__in=Role.values), name="core_apikey_role_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({KEY_SCHEME}_{self.prefix}_…)"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    def is_expired(self, now: datetime.datetime | None = None) -> bool:
        return self.expires_at is not None and self.expires_at <= (now or timezone.now())
