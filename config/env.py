"""Where the services are: environment variables, or the embedded default.

``DATABASE_URL`` (the runtime role), ``DATABASE_OWNER_URL`` (the role that owns the tables and runs
migrations) and ``REDIS_URL`` point at external servers. When ``DATABASE_URL`` / ``REDIS_URL`` are
unset, the settings module's default answers, set with :func:`use_when_unset` before it loads
``config.settings.base``: the development and test settings name the embedded PostgreSQL / Redis
of :mod:`devkit.embedded`, which are started (or found) then, except for ``manage.py embedded``,
which starts, stops or inspects them itself: loading the settings for it only locates them, so that
``embedded status`` or ``stop`` never starts a server. Production names none: it needs the URLs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import environ
from django.core.exceptions import ImproperlyConfigured

env = environ.Env()


@dataclass(frozen=True)
class ServiceUrls:
    database: str  # runtime role: web, worker, beat
    database_owner: str  # owner role: migrations
    # Superuser, optional: creates roles and the database (`manage.py db_bootstrap`).
    database_admin: str
    redis: str
    embedded: bool  # at least one embedded server is in use
    started_embedded: bool = False  # this process started an embedded server
    # DATABASE_POOLER's default: "pgbouncer" when the embedded one stands in front (devkit).
    database_pooler: str = ""


@cache
def service_urls() -> ServiceUrls:
    database = env.str("DATABASE_URL", default="")
    redis = env.str("REDIS_URL", default="")
    if database and redis:
        return ServiceUrls(
            database=database,
            database_owner=env.str("DATABASE_OWNER_URL", default=database),
            database_admin=env.str("DATABASE_ADMIN_URL", default=""),
            redis=redis,
            embedded=False,
        )

    if _when_unset is None:
        raise ImproperlyConfigured(
            "Set DATABASE_URL and REDIS_URL (and DATABASE_OWNER_URL): these settings start no "
            "embedded servers (config.settings.dev and .test do)"
        )
    return _when_unset(database, redis, _is_embedded_command())


# The default of the settings module being loaded (None: the URLs are required). It gets the URLs
# that are set ("" for the others) and whether this is `manage.py embedded` (locate, start nothing).
_when_unset: Callable[[str, str, bool], ServiceUrls] | None = None


def use_when_unset(default: Callable[[str, str, bool], ServiceUrls]) -> None:
    """Where the services are when ``DATABASE_URL`` / ``REDIS_URL`` are unset: called by a
    settings module before it loads ``config.settings.base``."""
    global _when_unset  # noqa: PLW0603 - one default per process, set by its settings module
    _when_unset = default
    service_urls.cache_clear()


def _is_embedded_command() -> bool:
    """Whether this process is ``manage.py embedded ...`` (or django-admin / python -m django)."""
    if len(sys.argv) < 2 or sys.argv[1] != "embedded":
        return False
    program = sys.argv[0].replace("\\", "/")
    return program.endswith(("manage.py", "django-admin", "django/__main__.py"))
