"""The audit log: who did what to which object, append-only and hash-chained per agency.

Rows are written only by :func:`audit.services.audit_record`. The database refuses UPDATE of an
entry outright and DELETE except on the two paths that may remove rows (migration 0002): the
retention purge (``audit_purge()``, a function owned by the table's owner) and the agency's own
deletion (``ON DELETE CASCADE`` from ``core_agency``, done by PostgreSQL). Rows with no agency
belong to the platform chain (superusers' logins, failed logins of unknown names, agency
deletions); only a platform context sees them.
"""

from __future__ import annotations

import uuid

from django.db import models

from core.models import Agency


class ActorType(models.TextChoices):
    USER = "user", "User"
    API_KEY = "api_key", "API key"
    SYSTEM = "system", "System"


class AuditEntry(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # PostgreSQL deletes an agency's entries with it (a cascade the append-only trigger allows);
    # Django's collector would delete them row by row, which the trigger refuses.
    agency = models.ForeignKey(
        Agency, null=True, blank=True, on_delete=models.DB_CASCADE, related_name="+"
    )
    seq = models.BigIntegerField(help_text="Position in the agency's chain (1, 2, ...).")
    at = models.DateTimeField()
    actor_type = models.CharField(max_length=16, choices=ActorType.choices)
    actor_user_id = models.BigIntegerField(
        "user ID", null=True, blank=True
    )  # kept after the user goes
    actor_api_key = models.CharField(
        "API key", max_length=32, blank=True, help_text="The key's prefix."
    )
    actor_display = models.CharField("actor", max_length=255, blank=True)
    ip = models.CharField("IP address", max_length=45, blank=True)
    user_agent = models.CharField(max_length=512, blank=True)
    action = models.CharField(max_length=64)
    object_type = models.CharField(max_length=100, blank=True)
    object_id = models.CharField("object ID", max_length=64, blank=True)
    object_repr = models.CharField("object", max_length=255, blank=True)
    changes = models.JSONField(default=dict, blank=True)  # {field: [before, after]}
    prev_hash = models.CharField(max_length=64, blank=True)
    hash = models.CharField(max_length=64)

    class Meta:
        verbose_name = "audit entry"
        verbose_name_plural = "audit entries"
        ordering = ["-at", "-seq"]
        constraints = [
            models.UniqueConstraint(
                fields=["agency", "seq"], name="audit_entry_seq_unique", nulls_distinct=False
            ),
            models.CheckConstraint(
                condition=models.Q(actor_type__in=ActorType.values), name="audit_actor_type_valid"
            ),
        ]
        indexes = [
            models.Index(fields=["agency", "at"], name="audit_entry_agency_at"),
            models.Index(fields=["agency", "action", "at"], name="audit_entry_action_at"),
            models.Index(fields=["agency", "object_type", "object_id"], name="audit_entry_object"),
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.object_type}:{self.object_id}".strip()


class AuditChain(models.Model):
    """One row per chain (an agency's, or the platform's with no agency): its head, locked by
    each writer so that entries are appended one at a time, and the anchor the retention purge
    leaves (the hash and position of the last entry it deleted), where verification starts."""

    agency = models.ForeignKey(
        Agency, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    head_seq = models.BigIntegerField(default=0)
    head_hash = models.CharField(max_length=64, blank=True)
    anchor_seq = models.BigIntegerField(default=0)
    anchor_hash = models.CharField(max_length=64, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["agency"], name="audit_chain_agency_unique", nulls_distinct=False
            ),
        ]

    def __str__(self) -> str:
        return f"audit chain of {self.agency_id or 'the platform'}"
