"""``manage.py embedded {status,start,stop,restart} [postgres|redis|pgbouncer|all]``: the
embedded PostgreSQL and Redis of this checkout, by hand, and the PgBouncer that may stand in front
of PostgreSQL (started only when named, or with AGENTDESK_EMBEDDED_PGBOUNCER=1; "all" includes it
once it was started in this data folder).

Loading the settings for this command starts nothing (config/env.py): ``status`` and ``stop``
never start a server. A server started again listens where it did before (devkit/embedded/), so
running processes reconnect to the URLs they already have.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from devkit import embedded


class Command(BaseCommand):
    help = (
        "Show, start, stop or restart the embedded PostgreSQL and Redis of this checkout (data "
        "under AGENTDESK_DATA_DIR, default .data/). A restarted server keeps its address. "
        "Every other command starts them when they are stopped."
    )
    # Some system checks query the database (generated columns), which may be the very server
    # this command is asked about while it is stopped.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["status", "start", "stop", "restart"])
        parser.add_argument(
            "service",
            nargs="?",
            default="all",
            choices=[*embedded.SERVICES, embedded.PGBOUNCER, "all"],
            help="one server, or all (default)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        service = options["service"]
        services = embedded.in_use() if service == "all" else (service,)
        action = options["action"]
        if action == "start":
            embedded.ensure_running(services)
        elif action == "stop":
            embedded.stop(services)
        elif action == "restart":
            embedded.restart(services)
        root = embedded.data_dir()
        for state in embedded.status(services):
            if state.pid:
                line = f"running (pid {state.pid}) at {state.address}"
            elif state.address:
                line = f"stopped (starts again at {state.address})"
            else:
                line = "stopped (never started)"
            self.stdout.write(f"{state.name}: {line}  [{root}]")
