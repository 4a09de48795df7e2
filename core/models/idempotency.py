"""The first answers to requests sent with an ``Idempotency-Key`` (:mod:`core.api.idempotency`
keeps and replays them)."""

from __future__ import annotations

from django.db import models

from core.models.tenancy import AgencyOwnedModel

MAX_KEY_LENGTH = 255


class IdempotencyRecord(AgencyOwnedModel):
    """The first answer to a request sent with an ``Idempotency-Key``."""

    credential = models.CharField(max_length=64)  # "key:<api key id>" or "user:<user id>"
    key = models.CharField(max_length=MAX_KEY_LENGTH)
    request_hash = models.CharField(max_length=64)  # SHA-256 of method, path and body
    response_status = models.PositiveSmallIntegerField()
    # The rendered JSON as text: jsonb would reorder the keys, and a replay is the same body.
    response_body = models.TextField()
    expires_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["agency", "credential", "key"], name="core_idempotency_unique_key"
            )
        ]
        indexes = [models.Index(fields=["expires_at"], name="core_idempotency_expires")]

    def __str__(self) -> str:
        return f"{self.credential} {self.key}"
