"""The embedded PostgreSQL and Redis as the services of the development and test settings, for
whichever of ``DATABASE_URL`` / ``REDIS_URL`` is unset (config/env.py, ``use_when_unset``).

``AGENTDESK_EMBEDDED_PGBOUNCER=1``: the runtime role's connections go through an embedded
PgBouncer in transaction pooling mode, as in a cluster (README "PgBouncer"); migrations and the
superuser's maintenance stay on PostgreSQL directly."""

from __future__ import annotations

import warnings

from config.env import ServiceUrls, env
from devkit import embedded


def embedded_service_urls(database: str, redis: str, locate_only: bool) -> ServiceUrls:
    """The embedded servers, started unless ``locate_only`` (``manage.py embedded``), standing in
    for the URLs that are unset (``database`` / ``redis`` empty)."""
    pooled = not database and env.bool("AGENTDESK_EMBEDDED_PGBOUNCER", default=False)
    names = (*embedded.SERVICES, embedded.PGBOUNCER) if pooled else embedded.SERVICES
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR on servers
        services = embedded.locate() if locate_only else embedded.ensure_running(names)
    runtime = (
        services.pooled_database_url(embedded.RUNTIME_ROLE)
        if pooled
        else services.database_url(embedded.RUNTIME_ROLE)
    )
    return ServiceUrls(
        database=database or runtime,
        database_owner=env.str("DATABASE_OWNER_URL", default="")
        or services.database_url(embedded.OWNER_ROLE),
        database_admin=services.database_url(embedded.SUPERUSER_ROLE, "postgres"),
        redis=redis or services.redis_url,
        embedded=True,
        started_embedded=services.started,
        database_pooler="pgbouncer" if pooled else "",
    )
