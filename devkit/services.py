"""The embedded PostgreSQL and Redis as the services of the development and test settings, for
whichever of ``DATABASE_URL`` / ``REDIS_URL`` is unset (config/env.py, ``use_when_unset``)."""

from __future__ import annotations

import warnings

from config.env import ServiceUrls, env
from devkit import embedded


def embedded_service_urls(database: str, redis: str, locate_only: bool) -> ServiceUrls:
    """The embedded servers, started unless ``locate_only`` (``manage.py embedded``), standing in
    for the URLs that are unset (``database`` / ``redis`` empty)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR on servers
        services = embedded.locate() if locate_only else embedded.ensure_running()
    return ServiceUrls(
        database=database or services.database_url(embedded.RUNTIME_ROLE),
        database_owner=env.str("DATABASE_OWNER_URL", default="")
        or services.database_url(embedded.OWNER_ROLE),
        database_admin=services.database_url(embedded.SUPERUSER_ROLE, "postgres"),
        redis=redis or services.redis_url,
        embedded=True,
        started_embedded=services.started,
    )
