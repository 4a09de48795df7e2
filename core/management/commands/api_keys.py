"""``manage.py api_keys {create,list,revoke}``: an agency's API keys from the shell.

``create`` prints the full key alone on stdout (so ``KEY=$(manage.py api_keys create ...)``
works) and what was made on stderr; the key is stored hashed and never shown again.
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from core import tenancy
from core.api_keys.services import api_key_create, api_key_revoke
from core.exceptions import ApplicationError
from core.models import Agency, Role
from core.models.api_keys import ApiKey

MAX_EXPIRY_DAYS = 3650


def _agency(slug: str) -> Agency:
    with tenancy.platform_context():
        agency = Agency.objects.filter(slug=slug).first()
    if agency is None:
        raise CommandError(f"No agency with the slug {slug!r}.")
    return agency


def _status(key: ApiKey, now: datetime.datetime) -> str:
    if key.is_revoked:
        return "revoked"
    if key.is_expired(now):
        return "expired"
    return "active"


def _when(value: datetime.datetime | None) -> str:
    return timezone.localtime(value).strftime("%Y-%m-%d %H:%M") if value else "-"


class Command(BaseCommand):
    help = (
        "Create, list and revoke an agency's API keys. `create` prints the key once: it is "
        "stored hashed and cannot be shown again."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        commands = parser.add_subparsers(dest="command", required=True, metavar="command")
        create = commands.add_parser("create", help="Create a key and print it (once).")
        create.add_argument("--agency", required=True, help="The agency's slug.")
        create.add_argument("--name", required=True, help="What the key is for.")
        create.add_argument(
            "--role",
            default=Role.STAFF,
            choices=Role.values,
            help="The rights the key acts with (default: staff).",
        )
        create.add_argument(
            "--expires-in-days",
            type=int,
            default=None,
            metavar="D",
            help=f"Refused after D days (1-{MAX_EXPIRY_DAYS}); default: never expires.",
        )
        listing = commands.add_parser("list", help="List an agency's keys (never their secret).")
        listing.add_argument("--agency", required=True, help="The agency's slug.")
        revoke = commands.add_parser("revoke", help="Revoke a key: refused from now on.")
        revoke.add_argument("key", help="The key's prefix (8 characters) or id.")

    def handle(self, *args: Any, **options: Any) -> None:
        handler = {"create": self._create, "list": self._list, "revoke": self._revoke}
        handler[options["command"]](options)

    def _create(self, options: dict[str, Any]) -> None:
        agency = _agency(options["agency"])
        days = options["expires_in_days"]
        if days is not None and not 1 <= days <= MAX_EXPIRY_DAYS:
            raise CommandError(f"--expires-in-days must be between 1 and {MAX_EXPIRY_DAYS}.")
        expires_at = timezone.now() + datetime.timedelta(days=days) if days else None
        try:
            with tenancy.agency_context(agency.id):
                key, full_key = api_key_create(
                    agency_id=agency.id,
                    name=options["name"],
                    role=options["role"],
                    expires_at=expires_at,
                )
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        expiry = f"expires {_when(key.expires_at)}" if key.expires_at else "never expires"
        self.stderr.write(
            f"Created API key {key.prefix} ({key.name!r}, role {key.role}, {expiry}) for "
            f"{agency.slug}. Copy it now: it is stored hashed and will not be shown again."
        )
        if not agency.is_active:
            self.stderr.write(f"Note: {agency.slug} is not active; its keys are refused.")
        self.stdout.write(full_key)

    def _list(self, options: dict[str, Any]) -> None:
        agency = _agency(options["agency"])
        with tenancy.agency_context(agency.id):
            keys = list(ApiKey.objects.filter(agency_id=agency.id).order_by("-created_at"))
        if not keys:
            self.stdout.write(f"{agency.slug} has no API keys.")
            return
        now = timezone.now()
        rows = [("PREFIX", "NAME", "ROLE", "STATUS", "CREATED", "LAST USED", "EXPIRES")]
        rows += [
            (
                key.prefix,
                key.name,
                key.role,
                _status(key, now),
                _when(key.created_at),
                _when(key.last_used_at),
                _when(key.expires_at),
            )
            for key in keys
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        for row in rows:
            self.stdout.write("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)))

    def _revoke(self, options: dict[str, Any]) -> None:
        ref = options["key"].strip()
        try:
            lookup: dict[str, Any] = {"pk": uuid.UUID(ref)}
        except ValueError:
            lookup = {"prefix": ref.removeprefix("adk_").split("_", 1)[0]}
        with tenancy.platform_context():
            key = ApiKey.objects.filter(**lookup).first()
        if key is None:
            raise CommandError(f"No API key {ref!r} (give its prefix or id).")
        if key.is_revoked:
            self.stdout.write(f"API key {key.prefix} ({key.name!r}) was already revoked.")
            return
        with tenancy.agency_context(key.agency_id):
            api_key_revoke(api_key=key)
        self.stdout.write(f"Revoked API key {key.prefix} ({key.name!r}).")
