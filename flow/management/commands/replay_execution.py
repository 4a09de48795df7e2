"""``manage.py replay_execution <execution id> [--json]``: replay a finished or failed run dry
(flow/replay/engine.py) and print the report: each recorded tool call, how the run decided it
and how the current tools would, and the differences. Applies no side effect, writes nothing.
Exits 1 when the replay found differences (handy in a script checking a change of tools)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents.models import Execution
from core import tenancy
from core.exceptions import ApplicationError
from flow.replay.engine import replay_execution


class Command(BaseCommand):
    help = "Replay a finished or failed run dry against the current tools and print the diff."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("execution_id", help="The run's id (a UUID).")
        parser.add_argument("--json", action="store_true", help="Print the report as JSON.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            execution_id = uuid.UUID(options["execution_id"])
        except ValueError as exc:
            raise CommandError(f"Not a run id: {options['execution_id']!r}.") from exc
        with tenancy.platform_context():  # which agency the run is of: then only that one
            found = Execution.objects.filter(pk=execution_id).values_list("agency_id", flat=True)
            agency_id = found.first()
        if agency_id is None:
            raise CommandError(f"No run {execution_id}.")
        with tenancy.agency_context(agency_id):
            execution = Execution.objects.select_related("agent").get(pk=execution_id)
            try:
                report = replay_execution(execution)
            except ApplicationError as exc:
                raise CommandError(exc.message) from exc
        if options["json"]:
            self.stdout.write(json.dumps(report.as_dict(), indent=1, default=str))
        else:
            self.stdout.write(report.to_text(), ending="")
        if report.differences:
            raise SystemExit(1)
