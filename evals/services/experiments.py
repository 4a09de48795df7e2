"""Experiments: a dataset version run against an agent version, one run per case, on the
workers through the real runtime (evals/run_plugin.py pins the version and hands each run its
case's recording to evals/tool_gate.py). A run is scored when it ends or parks
(:func:`experiment_result_score`, sent by evals/run_ended.py and the plugin), and the experiment
is completed with its last result.

Preconditions: in the agency context of the agent and dataset."""

from __future__ import annotations

import datetime
import uuid
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import Count, Q, Sum
from django.http import Http404
from django.utils import timezone

from agents.models import Agent, AgentVersion, Execution, ExecutionPurpose, TriggerType
from agents.services import execution_create
from agents.services.versions import access_agent_version
from core.exceptions import ApplicationError
from core.sending import send_task_on_commit
from evals.evaluation import MARK, run_facts
from evals.expectations import judge_check, score
from evals.models import (
    DatasetVersion,
    Experiment,
    ExperimentKind,
    ExperimentResult,
    ExperimentStatus,
    ResultStatus,
    TestCase,
)
from flow.models import LoopDetection

SCORE_TASK = "evals.score_result"
GATE_TASK = "evals.gate_decide"  # a deploy gate's experiment completed (evals.services.gate)
JUDGE_TASK = "evals.judge_result"
# Where a case's run may start from: a case of an event or another agent replays as a manual run
# with the same payload (no event is emitted, no parent run is there).
REPLAYED_TRIGGERS = {TriggerType.MANUAL, TriggerType.SCHEDULE, TriggerType.WEBHOOK}


def experiment_version(agent: Agent, number: int | None) -> AgentVersion:
    """The agent's version ``number``, or its current one; 400 when it has none."""
    if number is not None:
        try:
            return access_agent_version(agent=agent, number=number)
        except Http404:
            raise ApplicationError(
                "no_such_version", f"{agent.name} has no version {number}.", status=422
            ) from None
    if agent.current_version_id is None:
        raise ApplicationError("no_version", f"{agent.name} has no saved version.", status=409)
    return AgentVersion.objects.get(pk=agent.current_version_id)


def experiment_start(
    *,
    agent: Agent,
    dataset_version: DatasetVersion,
    version_number: int | None = None,
    user_id: int | None = None,
    kind: str = ExperimentKind.MANUAL,
    min_pass_rate: Decimal | None = None,
    draft_config: dict[str, Any] | None = None,
) -> Experiment:
    """Start one run per case of ``dataset_version`` on ``agent``'s version ``version_number``
    (its current one when None); the runs reach the workers when the caller's transaction
    commits. Refused (400, nothing written) for a dataset of another agent, an empty version,
    or an agent that may not start runs (inactive). ``kind``: who asked (a deploy gate, with
    its ``min_pass_rate``); ``draft_config``: an unsaved configuration of the editor, which the
    runs use instead of the version's (evals/run_plugin.py)."""
    dataset = dataset_version.dataset
    if dataset.agent_id is not None and dataset.agent_id != agent.pk:
        raise ApplicationError(
            "other_agent",
            f"Dataset {dataset.name!r} holds another agent's test cases.",
            status=422,
        )
    version = experiment_version(agent, version_number)
    cases = list(TestCase.objects.filter(version=dataset_version))
    if not cases:
        raise ApplicationError("empty_dataset", f"{dataset_version} has no test case.", status=409)
    with transaction.atomic():
        experiment = Experiment.objects.create(
            agency_id=agent.agency_id,
            agent=agent,
            agent_version=version,
            dataset_version=dataset_version,
            started_by_id=user_id,
            case_count=len(cases),
            kind=kind,
            min_pass_rate=min_pass_rate,
            draft_config=draft_config,
        )
        for case in cases:
            result = ExperimentResult.objects.create(
                agency_id=agent.agency_id, experiment=experiment, case=case
            )
            execution = execution_create(
                agent=agent,
                trigger_type=case.trigger_type
                if case.trigger_type in REPLAYED_TRIGGERS
                else TriggerType.MANUAL,
                input=case.input,
                trigger_data=case.trigger_payload,
                triggered_by_id=user_id,
                # An experiment is asked for: the agent's hourly and daily run limits are for
                # its live work.
                enforce_limits=False,
                # Not the agent's work: its stats, memory and learning leave the run out.
                purpose=ExecutionPurpose.EVALUATION,
                agent_version_id=version.pk,  # the kernel starts it on that version
                initial_context={
                    MARK: {
                        "experiment_id": str(experiment.pk),
                        "result_id": str(result.pk),
                        "case_id": str(case.pk),
                        "agent_version_id": str(version.pk),
                        # (read by the run plugin without a query for any other experiment)
                        "draft": draft_config is not None,
                    }
                },
            )
            if execution is None:
                raise ApplicationError(
                    "not_started",
                    f"{agent.name} may not start a run now (inactive): see its trigger log.",
                    status=409,
                )
            result.execution = execution
            result.save(update_fields=["execution", "updated_at"])
    return experiment


def experiment_result_score(*, result_id: uuid.UUID | str) -> ExperimentResult | None:
    """Score the result's run as it ended or parked, then the experiment once every result is
    scored. Again for a run scored already (it parked, then ended): the later score wins."""
    with transaction.atomic():
        result = (
            ExperimentResult.objects.select_for_update(of=("self",))
            .select_related("case", "execution")
            .filter(pk=result_id)
            .first()
        )
        if result is None or result.execution is None:
            return None
        execution: Execution = result.execution
        facts, unrecorded = run_facts(execution)
        checks = score(result.case.expectations, facts)
        result.checks = list(checks)
        judged = bool(result.case.expectations.get("judge_rubric"))
        # A case with a rubric stays running until its judge answers (evals/judge.py, on a
        # worker once this commits): scoring never waits on a model.
        result.status = (
            ResultStatus.RUNNING
            if judged
            else ResultStatus.PASSED
            if all(c["passed"] for c in checks)
            else ResultStatus.FAILED
        )
        result.judge_score, result.judge_reason = None, ""
        result.steps = facts.steps
        result.tokens_total = execution.tokens_total
        result.cost_usd = execution.cost_usd
        result.latency_ms = execution.duration_ms
        result.unrecorded_calls = unrecorded
        result.loops_flagged = LoopDetection.objects.filter(execution_id=execution.pk).count()
        result.scored_at = timezone.now()
        result.save()
        _experiment_update(result.experiment_id)
        if judged:
            send_task_on_commit(
                JUDGE_TASK,
                str(result.pk),
                agency_id=result.agency_id,
                about=f"experiment result {result.pk}",
                then="its experiment stays running; start it again",
            )
    return result


def experiment_result_judged(
    *,
    result_id: uuid.UUID,
    scored_at: datetime.datetime | None,
    score: float | None,
    reason: str,
    cost: Decimal = Decimal(0),
) -> ExperimentResult | None:
    """The judge's verdict on the result scored at ``scored_at``: its ``judge`` check, then the
    result's and the experiment's status. A verdict on an earlier scoring (the run parked, was
    judged, then ended and was scored again) is dropped: the later scoring's judge decides.
    Precondition: in the result's agency context."""
    with transaction.atomic():
        result = (
            ExperimentResult.objects.select_for_update(of=("self",))
            .select_related("case")
            .filter(pk=result_id, scored_at=scored_at, status=ResultStatus.RUNNING)
            .first()
        )
        if result is None:
            return None
        check = judge_check(result.case.expectations, score, reason)
        result.checks = [*result.checks, check]
        result.status = (
            ResultStatus.PASSED if all(c["passed"] for c in result.checks) else ResultStatus.FAILED
        )
        result.judge_score, result.judge_reason, result.judge_cost_usd = score, reason, cost
        result.save(
            update_fields=[
                "checks", "status", "judge_score", "judge_reason", "judge_cost_usd", "updated_at"
            ]
        )  # fmt: skip
        _experiment_update(result.experiment_id)
    return result


def _experiment_update(experiment_id: uuid.UUID) -> None:
    experiment = Experiment.objects.select_for_update().get(pk=experiment_id)
    totals = experiment.results.aggregate(
        running=Count("pk", filter=Q(status=ResultStatus.RUNNING)),
        passed=Count("pk", filter=Q(status=ResultStatus.PASSED)),
        tokens=Sum("tokens_total"),
        cost=Sum("cost_usd"),
    )
    experiment.passed_count = totals["passed"]
    experiment.tokens_total = totals["tokens"] or 0
    experiment.cost_usd = totals["cost"] or Decimal(0)
    if totals["running"] == 0 and experiment.status == ExperimentStatus.RUNNING:
        experiment.status = ExperimentStatus.COMPLETED
        experiment.finished_at = timezone.now()
        if experiment.kind == ExperimentKind.GATE:  # its version waits for the verdict
            send_task_on_commit(
                GATE_TASK,
                str(experiment.pk),
                agency_id=experiment.agency_id,
                about=f"deploy gate experiment {experiment.pk}",
                then="its version stays not current; activate it over the API once it passed",
            )
    experiment.save()


def send_score(result_id: str, *, agency_id: uuid.UUID | str) -> None:
    """Score the result once the current transaction (the run's end or park) commits."""
    send_task_on_commit(
        SCORE_TASK,
        result_id,
        agency_id=agency_id,
        about=f"experiment result {result_id}",
        then="its experiment stays running; start it again",
    )
