"""A signing secret that rotates with an overlap, shared by inbound webhooks
(:class:`webhooks.models.Webhook`) and outbound subscriptions
(:class:`webhooks.outbound.models.Subscription`).

The secret is stored only as a Fernet token (:mod:`core.crypto`). A rotation keeps the previous
secret valid until ``previous_secret_expires_at``, so that the other side can switch without
losing a delivery. Imports nothing of :mod:`webhooks`: both models modules build on it, and
:mod:`webhooks.models` re-exports the outbound one.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable

from django.db import models, transaction
from django.utils import timezone

from core import crypto
from core.models import AgencyOwnedModel

# What a rotation writes (and nothing else: a concurrent rename or disabling is kept).
ROTATION_FIELDS = (
    "secret_encrypted", "previous_secret_encrypted", "previous_secret_expires_at", "rotated_at",
    "updated_at",
)  # fmt: skip


class RotatingSecretModel(AgencyOwnedModel):
    """An agency's row with a secret, and the previous one during a rotation's overlap."""

    secret_encrypted = crypto.EncryptedTextField(editable=False)
    previous_secret_encrypted = crypto.EncryptedTextField(blank=True, editable=False)
    previous_secret_expires_at = models.DateTimeField(
        "previous secret valid until", null=True, blank=True, editable=False
    )
    rotated_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        abstract = True

    def set_secret(self, secret: str) -> None:
        """Encrypt ``secret`` into the instance; the caller saves."""
        self.secret_encrypted = crypto.encrypt(secret)

    def get_secret(self) -> str:
        """The plaintext secret. Only signatures (and the shown-once answer) need it."""
        return crypto.decrypt(self.secret_encrypted)

    def valid_secrets(self) -> list[str]:
        """The secrets valid now (a delivery is signed, or may be signed, with any): the current
        one, and the previous one during a rotation's overlap."""
        found = [self.get_secret()]
        if (
            self.previous_secret_encrypted
            and self.previous_secret_expires_at is not None
            and self.previous_secret_expires_at > timezone.now()
        ):
            found.append(crypto.decrypt(self.previous_secret_encrypted))
        return found


def rotate_secret[R: RotatingSecretModel](
    row: R, *, overlap_seconds: int, new_secret: Callable[[], str]
) -> tuple[R, str]:
    """A new secret (``new_secret()``) for ``row``; returns the row as saved and the secret,
    which exists in plaintext only here. The current secret stays valid ``overlap_seconds`` more
    (0: none); a secret still in an earlier rotation's overlap is dropped. Locks the row: two
    rotations at once do not lose a secret. The caller checks ``overlap_seconds``."""
    with transaction.atomic():
        locked = type(row)._default_manager.select_for_update().get(pk=row.pk)
        now = timezone.now()
        if overlap_seconds:
            locked.previous_secret_encrypted = locked.secret_encrypted
            locked.previous_secret_expires_at = now + datetime.timedelta(seconds=overlap_seconds)
        else:
            locked.previous_secret_encrypted = ""
            locked.previous_secret_expires_at = None
        secret = new_secret()
        locked.set_secret(secret)
        locked.rotated_at = now
        locked.save(update_fields=ROTATION_FIELDS)
    return locked, secret
