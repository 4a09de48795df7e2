"""``manage.py rotate_encryption_keys``: re-encrypt every stored secret with the primary key."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from core import crypto


class Command(BaseCommand):
    help = (
        "Re-encrypt every stored secret (LLM provider API keys, ...) of every agency with the "
        f"first key of {crypto.ENV_VAR}. Put the new key first, keep the old ones after it, run "
        "this, then remove the old keys."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            rotated = crypto.secrets_rotate()
        except crypto.DecryptionError as exc:
            raise CommandError(f"Nothing was changed: {exc}.") from exc
        for label, count in rotated.items():
            self.stdout.write(f"{label}: {count} re-encrypted")
        self.stdout.write(self.style.SUCCESS(f"Done: {sum(rotated.values())} secrets re-encrypted"))
