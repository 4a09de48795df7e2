"""Invitations: how an agency admin brings a colleague in.

An invitation names an e-mail address and a role; its link carries a one-time token of which
only the SHA-256 is stored (the token is 32 random bytes, so a fast hash is enough, as for API
keys). The membership itself is :class:`core.models.Membership`.
"""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.db.models.functions import Lower
from django.utils import timezone

from core.models import AgencyOwnedModel, Role

TOKEN_BYTES = 32


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class InvitationStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    ACCEPTED = "accepted", "Accepted"
    REVOKED = "revoked", "Revoked"
    EXPIRED = "expired", "Expired"


class Invitation(AgencyOwnedModel):
    """A pending, accepted or revoked invitation to join an agency with a role.

    Row-level security: the agency policy, plus a SELECT-only policy that shows the single row
    whose token hash :func:`members.selectors.invitation_lookup_context` names, so that the
    accept page (no login, no tenant yet) can find it.
    """

    email = models.EmailField(max_length=254)
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.STAFF)
    # The username the new login gets unless the invitee picks another; empty: they choose.
    username = models.CharField(max_length=150, blank=True)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    expires_at = models.DateTimeField()
    last_sent_at = models.DateTimeField(null=True, blank=True)
    send_count = models.PositiveIntegerField(default=0)
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(role__in=Role.values), name="members_invitation_role_valid"
            ),
            # One open invitation per address and agency (an expired one is revoked by the next
            # invite); the service says so first, this settles a race.
            models.UniqueConstraint(
                Lower("email"),
                "agency",
                condition=models.Q(accepted_at__isnull=True, revoked_at__isnull=True),
                name="members_invitation_one_open_per_email",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.email} ({self.get_role_display()})"

    @property
    def status(self) -> str:
        if self.accepted_at is not None:
            return InvitationStatus.ACCEPTED
        if self.revoked_at is not None:
            return InvitationStatus.REVOKED
        if self.expires_at <= timezone.now():
            return InvitationStatus.EXPIRED
        return InvitationStatus.PENDING

    @property
    def is_pending(self) -> bool:
        return self.status == InvitationStatus.PENDING
