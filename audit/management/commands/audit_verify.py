"""``manage.py audit_verify [--agency <id>]``: check the audit log's hash chains."""

from __future__ import annotations

import uuid
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from audit.chain import verify_chain
from audit.models import AuditChain
from core import tenancy


class Command(BaseCommand):
    help = (
        "Verify the audit log's hash chains (every agency's and the platform's, or one "
        "agency's): exits 1 naming the first entry that was changed, removed or inserted."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--agency", help="An agency's id: only its chain.")

    def handle(self, *args: Any, **options: Any) -> None:
        agency = options.get("agency")
        agency_id = None
        if agency:
            try:
                agency_id = uuid.UUID(agency)
            except ValueError:
                raise CommandError(f"--agency: not an agency id: {agency!r}") from None
        with tenancy.platform_context():
            chains = AuditChain.objects.order_by("agency_id")
            if agency_id is not None:
                chains = chains.filter(agency_id=agency_id)
            broken = 0
            for chain in chains:
                checked, fault = verify_chain(chain)
                name = chain.agency_id or "platform"
                if fault is None:
                    self.stdout.write(f"{name}: {checked} entries verified")
                else:
                    broken += 1
                    self.stderr.write(f"BROKEN {fault} ({checked} entries verified before it)")
        if broken:
            raise SystemExit(1)
