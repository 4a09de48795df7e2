"""Where the services are: environment variables, or the embedded default.

``DATABASE_URL`` (the runtime role), ``DATABASE_OWNER_URL`` (the role that owns the tables and runs
migrations) and ``REDIS_URL`` point at external servers. When ``DATABASE_URL`` / ``REDIS_URL`` are
unset, the embedded PostgreSQL / Redis of :mod:`core.embedded` are started (or found) instead,
except for ``manage.py embedded``, which starts, stops or inspects them itself: loading the settings
for it only locates them, so that ``embedded status`` or ``stop`` never starts a server.
"""

from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass
from functools import cache

import environ

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

    from core import embedded  # noqa: PLC0415 - only the embedded default needs it

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR on servers
        services = embedded.locate() if _is_embedded_command() else embedded.ensure_running()
    return ServiceUrls(
        database=database or services.database_url(embedded.RUNTIME_ROLE),
        database_owner=env.str("DATABASE_OWNER_URL", default="")
        or services.database_url(embedded.OWNER_ROLE),
        database_admin=services.database_url(embedded.SUPERUSER_ROLE, "postgres"),
        redis=redis or services.redis_url,
        embedded=True,
        started_embedded=services.started,
    )


def _is_embedded_command() -> bool:
    """Whether this process is ``manage.py embedded ...`` (or django-admin / python -m django)."""
    if len(sys.argv) < 2 or sys.argv[1] != "embedded":
        return False
    program = sys.argv[0].replace("\\", "/")
    return program.endswith(("manage.py", "django-admin", "django/__main__.py"))
