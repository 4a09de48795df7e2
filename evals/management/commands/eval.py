"""``manage.py eval run --agent A --dataset D [--version N] [--min-pass 0.9]``: run a dataset
against an agent version on the workers (a worker must be running: ``manage.py up`` or
``celery -A config worker``), wait for every case, print each case's result, and exit 1 when
the pass rate is below ``--min-pass`` (2 when it did not finish in ``--timeout`` seconds), so a
CI pipeline can gate on it. ``A``: the agent's id or slug; ``D``: the dataset's id or name;
``--agency`` (id or name) when a slug or name is found in more than one agency."""

from __future__ import annotations

import time
import uuid
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Model, Q, QuerySet

from agents.models import Agent
from core import tenancy
from core.exceptions import ApplicationError
from core.models import Agency
from evals.models import Dataset, Experiment, ExperimentStatus
from evals.services.experiments import experiment_start


def _one[M: Model](queryset: QuerySet[M], value: str, field: str, what: str) -> M:
    try:
        by = Q(pk=uuid.UUID(value))
    except ValueError:
        by = Q(**{field: value})
    found = list(queryset.filter(by)[:2])
    if not found:
        raise CommandError(f"No {what} {value!r}.")
    if len(found) > 1:
        raise CommandError(f"More than one {what} {value!r}: name the agency with --agency.")
    return found[0]


class Command(BaseCommand):
    help = "Evaluations: run a dataset against an agent version (README 'Evaluations')."

    def add_arguments(self, parser: CommandParser) -> None:
        commands = parser.add_subparsers(dest="command", required=True)
        run = commands.add_parser("run", help="Run a dataset against an agent version.")
        run.add_argument("--agent", required=True, help="The agent's id or slug.")
        run.add_argument("--dataset", required=True, help="The dataset's id or name.")
        run.add_argument("--version", type=int, help="The agent's version (its current one).")
        run.add_argument("--min-pass", type=float, default=1.0, help="Pass rate needed (0-1).")
        run.add_argument("--agency", help="The agency's id or name.")
        run.add_argument("--timeout", type=float, default=600, help="Seconds to wait.")

    def handle(self, *args: Any, **options: Any) -> None:
        with tenancy.platform_context():
            agents = Agent.objects.all()
            datasets = Dataset.objects.select_related("current_version")
            if options["agency"]:
                agency = _one(Agency.objects.all(), options["agency"], "name", "agency")
                agents, datasets = agents.filter(agency=agency), datasets.filter(agency=agency)
            agent = _one(agents, options["agent"], "slug", "agent")
            dataset = _one(
                datasets.filter(agency=agent.agency_id), options["dataset"], "name", "dataset"
            )
        with tenancy.agency_context(agent.agency_id):
            assert dataset.current_version is not None
            try:
                experiment = experiment_start(
                    agent=agent,
                    dataset_version=dataset.current_version,
                    version_number=options["version"],
                )
            except ApplicationError as exc:
                raise CommandError(exc.message) from None
        self.stdout.write(
            f"Experiment {experiment.pk}: {agent.slug} version "
            f"{experiment.agent_version.number if experiment.agent_version else '?'} on "
            f"{dataset.name} v{dataset.current_version.number}, {experiment.case_count} case(s)"
        )
        done = self._wait(experiment, options["timeout"])
        with tenancy.agency_context(agent.agency_id):
            results = list(done.results.select_related("case").order_by("case__position"))
        for result in results:
            failed = [c["check"] for c in result.checks if not c["passed"]]
            cost = f"${result.cost_usd:.4f}"
            self.stdout.write(
                f"  {result.status.upper():7} {result.case.name}  steps={result.steps} "
                f"tokens={result.tokens_total} cost={cost} latency_ms={result.latency_ms} "
                f"unrecorded={result.unrecorded_calls}"
                + (f"\n          failed: {'; '.join(failed)}" if failed else "")
            )
        rate = done.pass_rate
        self.stdout.write(
            f"Passed {done.passed_count}/{done.case_count} ({rate:.0%}); "
            f"needed {options['min_pass']:.0%}; cost ${done.cost_usd:.4f}"
        )
        if done.status != ExperimentStatus.COMPLETED:
            raise CommandError(f"Not finished after {options['timeout']:.0f} s.", returncode=2)
        if rate < options["min_pass"]:
            raise CommandError("Below the pass rate needed.", returncode=1)

    def _wait(self, experiment: Experiment, timeout: float) -> Experiment:
        deadline = time.monotonic() + timeout
        while True:
            with tenancy.agency_context(experiment.agency_id):
                current = Experiment.objects.select_related("agent_version").get(pk=experiment.pk)
            if current.status == ExperimentStatus.COMPLETED or time.monotonic() > deadline:
                return current
            time.sleep(0.5)
