"""``manage.py db_bootstrap``: create the owner and runtime roles, the database and pgvector on an
external PostgreSQL (production). The embedded server does this by itself."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from config.env import service_urls
from core import db_roles


class Command(BaseCommand):
    help = (
        "With DATABASE_ADMIN_URL (a superuser), create or refresh the roles named in "
        "DATABASE_OWNER_URL and DATABASE_URL (with their passwords), the database owned by the "
        "owner role, and the vector extension. Idempotent; run before `migrate`."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        admin_url = service_urls().database_admin
        if not admin_url:
            raise CommandError("DATABASE_ADMIN_URL is not set: it must name a superuser connection")
        owner = settings.DATABASES["owner"]
        runtime = settings.DATABASES["default"]
        if owner["USER"] == runtime["USER"]:
            raise CommandError(
                "DATABASE_URL and DATABASE_OWNER_URL use the same role: row-level security needs a "
                "runtime role that does not own the tables"
            )
        db_roles.bootstrap(
            admin_url,
            database=owner["NAME"],
            owner=owner["USER"],
            runtime=runtime["USER"],
            owner_password=owner.get("PASSWORD") or None,
            runtime_password=runtime.get("PASSWORD") or None,
        )
        self.stdout.write(
            f"roles {owner['USER']} (owner) and {runtime['USER']} (runtime) and database "
            f"{owner['NAME']} are ready"
        )
