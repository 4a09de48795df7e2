"""``manage.py embedded {status,stop}``: inspect or stop the embedded PostgreSQL and Redis."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from core import embedded


class Command(BaseCommand):
    help = (
        "Show (status) or stop (stop) the embedded PostgreSQL and Redis of this checkout "
        "(data under AGENTDESK_DATA_DIR, default .data/). Any other command starts them."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["status", "stop"])

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] == "stop":
            embedded.stop()
        for name, pid in embedded.running_pids().items():
            state = f"running (pid {pid})" if pid else "stopped"
            self.stdout.write(f"{name}: {state}  [{embedded.data_dir()}]")
