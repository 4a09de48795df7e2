"""``migrate`` as the owner role by default, then refresh the runtime role's grants.

The runtime role (the ``default`` alias) may not create tables; migrations belong to the owner.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser
from django.core.management.commands.migrate import Command as DjangoMigrateCommand
from django.db import DEFAULT_DB_ALIAS

from core.services import database_grant_runtime

OWNER_ALIAS = "owner"


class Command(DjangoMigrateCommand):
    help = (
        "Apply migrations as the owner role (DATABASE_OWNER_URL), then grant the runtime role "
        "data access to every table."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.set_defaults(database=OWNER_ALIAS)

    def handle(self, *args: Any, **options: Any) -> None:
        if options["database"] == DEFAULT_DB_ALIAS:
            options["database"] = OWNER_ALIAS
        super().handle(*args, **options)
        if not options.get("plan") and not options.get("check_unapplied"):
            database_grant_runtime()
