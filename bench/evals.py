"""An experiment of many test cases on the demo model through real workers (issue 28): wall time
from its start to its completion (every case's run replayed from its recording, scored, and
judged by the LLM judge), the workers' CPU, and per case the run's latency and the time until
the case was done (p50/p95).

The cases are copies of one case saved from a real demo run of the demo agency's assistant
("Follow up with Marcus Oyelaran about his demo": 5 model calls, 4 tool calls answered from the
recording), each with a rubric for the judge; the demo model answers without thinking time, in
a process of its own.

    .venv/bin/python -m bench.evals [--cases 50] [--workers 1] [--threads 8]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from agents.models import Agent, Execution
from agents.services import execution_create
from bench import common
from core import tenancy
from devkit.demo import demo_data_seed
from devkit.fake_server.demo import demo_responder
from evals.models import Dataset, Experiment, ExperimentResult
from evals.services.cases import case_save_from_execution
from evals.services.datasets import current_cases, dataset_create, dataset_version_create
from evals.services.experiments import experiment_start
from tests.factories import AgencyFactory, SiteFactory

ASK = "Follow up with Marcus Oyelaran about his demo."
RUBRIC = "Finds the contact, notes the follow-up and creates a task for it."
TERMINAL = ("completed", "failed", "cancelled", "timed_out")


def _wait(seconds: float, done: Any) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = done()
        if found:
            return found
        time.sleep(0.1)
    raise SystemExit(f"not done within {seconds} s")


def _dataset(agent: Agent, cases: int) -> Dataset:
    """``cases`` copies of the case saved from one real run of ``agent``, each with a rubric."""
    with tenancy.agency_context(agent.agency_id):
        source = execution_create(agent=agent, input=ASK)
        assert source is not None

    def ended() -> Execution | None:
        with tenancy.agency_context(agent.agency_id):
            run = Execution.objects.get(pk=source.pk)
        return run if run.status in TERMINAL else None

    run = _wait(120, ended)
    assert run.status == "completed", run.error
    with tenancy.agency_context(agent.agency_id):
        dataset = dataset_create(
            agency_id=agent.agency_id, name="bench cases", agent=agent, user_id=None
        )
        case_save_from_execution(execution=run, dataset=dataset, user_id=None)
        dataset.refresh_from_db()
        [case] = current_cases(dataset)
        case.pop("key", None)
        case["expectations"] = {**case["expectations"], "judge_rubric": RUBRIC}
        copies = [{**case, "name": f"case {n + 1}"} for n in range(cases)]
        dataset_version_create(dataset=dataset, cases=copies, summary="bench", user_id=None)
        return Dataset.objects.select_related("current_version").get(pk=dataset.pk)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=50)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()
    load_before = os.getloadavg()
    common.create_database()
    facts = common.machine_facts()
    workers = [common.worker(concurrency=args.threads) for _ in range(args.workers)]
    try:
        for worker in workers:
            worker.start()
        responder = demo_responder(think_seconds=0, stream_interval=0)
        with common.FakeServerProcess(responder) as server:
            agency = AgencyFactory.create()
            SiteFactory.create(agency=agency)
            demo_data_seed(agency=agency, model_url=server.openai_base_url)
            with tenancy.agency_context(agency.id):
                alex = Agent.objects.get(agency=agency, slug="alex")
            dataset = _dataset(alex, args.cases)
            meter = common.CpuMeter(
                workers=[worker.process.pid for worker in workers],
                demo_model=[server.pid],
                bench=[os.getpid()],
            )
            with meter:
                with tenancy.agency_context(agency.id):
                    assert dataset.current_version is not None
                    started = experiment_start(agent=alex, dataset_version=dataset.current_version)

                def completed() -> Experiment | None:
                    with tenancy.agency_context(agency.id):
                        experiment = Experiment.objects.get(pk=started.pk)
                    return experiment if experiment.status == "completed" else None

                experiment = _wait(1800, completed)
            load_after = os.getloadavg()
            with tenancy.agency_context(agency.id):
                results = list(
                    ExperimentResult.objects.filter(experiment=experiment).select_related(
                        "execution"
                    )
                )
    finally:
        for worker in workers:
            worker.stop()
        common.drop_database()
    assert experiment.finished_at is not None
    wall = (experiment.finished_at - experiment.created_at).total_seconds()
    latencies = [float(r.latency_ms or 0) for r in results]
    done = [(r.updated_at - experiment.created_at).total_seconds() * 1000 for r in results]
    steps = sum(r.steps for r in results)
    report = {
        "machine": facts.as_dict(),
        "load_average_1_5_15_before": [round(x, 2) for x in load_before],
        "load_average_1_5_15_after": [round(x, 2) for x in load_after],
        "cases": len(results),
        "passed": experiment.passed_count,
        "judged": sum(1 for r in results if r.judge_score is not None),
        "worker_processes": args.workers,
        "threads_per_worker": args.threads,
        "wall_seconds_start_to_completed": round(wall, 2),
        "cases_per_second": round(len(results) / wall, 2),
        "run_latency_ms_p50": round(common.percentile(latencies, 50), 1),
        "run_latency_ms_p95": round(common.percentile(latencies, 95), 1),
        "case_done_after_start_ms_p50": round(common.percentile(done, 50), 1),
        "case_done_after_start_ms_p95": round(common.percentile(done, 95), 1),
        "model_calls_of_runs": steps,
        **meter.report(len(results), "case"),
    }
    print(facts.describe())
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
