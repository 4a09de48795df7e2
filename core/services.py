"""Writers for tenancy data and platform set-up (the demo agency: :mod:`devkit.demo`)."""

from __future__ import annotations

import json

from django.conf import settings
from django.db import connections
from django.utils.text import slugify
from django_celery_beat.models import PeriodicTask

from core import db_roles, tenancy
from core.models import Agency, Membership, Role, Site, User


def conninfo(alias: str) -> str:
    """A libpq connection string for a configured database alias (for plain psycopg work)."""
    return db_roles.conninfo_from_settings(connections[alias].settings_dict)


def database_grant_runtime() -> None:
    """Grant the runtime role (``default`` alias) data access to every table; run as the owner."""
    runtime = settings.DATABASES["default"]["USER"]
    if runtime == settings.DATABASES["owner"]["USER"]:
        return  # a single-role deployment (not recommended): nothing to grant
    db_roles.grant_runtime(conninfo("owner"), runtime=runtime)


def agency_create(*, name: str, slug: str | None = None) -> Agency:
    """Create an agency with a default site. Platform-wide: runs outside any one tenant."""
    with tenancy.platform_context():
        agency = Agency.objects.create(name=name, slug=slug or slugify(name))
        Site.objects.create(agency=agency, name=f"{name} main site")
    return agency


def agency_delete(*, agency: Agency) -> None:
    """Delete an agency with every row it owns (each agency-owned table cascades from it) and
    the beat entries that start work for it (its agents' cron triggers): those are in a table
    without an agency column, and name it in their task's ``agency_id``. Platform-wide: runs
    outside any one tenant, in one transaction."""
    agency_id = str(agency.id)
    with tenancy.platform_context():
        entries = PeriodicTask.objects.filter(kwargs__contains=agency_id).only("pk", "kwargs")
        PeriodicTask.objects.filter(
            pk__in=[entry.pk for entry in entries if _names_agency(entry.kwargs, agency_id)]
        ).delete()
        agency.delete()


def _names_agency(kwargs: str, agency_id: str) -> bool:
    try:
        decoded = json.loads(kwargs or "{}")
    except ValueError:
        return False
    return isinstance(decoded, dict) and decoded.get("agency_id") == agency_id


def membership_add(*, agency: Agency, user: User, role: str = Role.STAFF) -> Membership:
    with tenancy.agency_context(agency.id):
        return Membership.objects.create(agency=agency, user=user, role=role)
