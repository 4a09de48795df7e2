"""The LLM judge of a case's rubric (evals/judge.py), through a real worker and the demo model
(the scripted provider on loopback, no real LLM): a rubric case judged, its score, reason and
cost, the call on the day's evaluation usage and against the evaluation budget; a reply that is
not JSON; an evaluation budget exhausted. And the rules read without a worker: the verdict's
parsing, the threshold, the expectations' validation."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from core import tenancy
from core.exceptions import ApplicationError
from core.models import Agency, Role
from devkit.fake_server.demo import DemoModelServer, demo_responder
from devkit.fake_server.script import RecordedRequest, Reply, Step
from evals.expectations import judge_check, validate_expectations
from evals.judge import BUDGET_EXHAUSTED, SYSTEM, parse_verdict
from evals.models import Dataset, ExperimentResult, TestCase
from evals.services.datasets import dataset_case_change
from tests.api.conftest import token_client
from tests.evals import test_experiments as experiments
from tests.evals.test_experiments import ASK, _agent, _dataset_of, _experiment, _run
from tests.factories import MembershipFactory
from tests.processes import Worker
from usage.models import EvaluationBudget, UsageDaily

# The demo model and a demo agency on it, as the experiments' tests have them.
demo_model, demo_agency = experiments.demo_model, experiments.demo_agency
RUBRIC = "Finds the contact, notes the follow-up and creates a task for it."


def _with_rubric(dataset: Dataset, **more: Any) -> Dataset:
    with tenancy.agency_context(dataset.agency_id):
        case = TestCase.objects.get(version=dataset.current_version)
        dataset_case_change(
            dataset=dataset,
            key=str(case.key),
            changes={"expectations": {**case.expectations, "judge_rubric": RUBRIC, **more}},
            user_id=None,
        )
        return Dataset.objects.select_related("current_version").get(pk=dataset.pk)


def _judged(agency: Agency, *, more: dict[str, Any] | None = None) -> ExperimentResult:
    alex = _agent(agency, "alex")
    run = _run(alex, ASK)
    dataset = _with_rubric(_dataset_of(run, alex), **(more or {}))
    experiment = _experiment(alex, dataset)  # completed: once its judge answered
    with tenancy.agency_context(agency.id):
        return ExperimentResult.objects.select_related("execution", "experiment").get(
            experiment=experiment
        )


def _evaluation_usage(agency: Agency) -> tuple[int, Decimal]:
    with tenancy.agency_context(agency.id):
        row = UsageDaily.objects.get(agency=agency, purpose="evaluation")
        return row.llm_calls, row.cost_usd


def _budget(agency: Agency) -> tuple[Decimal, Decimal] | None:
    with tenancy.agency_context(agency.id):
        row = EvaluationBudget.objects.filter(agency=agency).first()
        return (row.used_usd, row.reserved_usd) if row else None


@pytest.mark.slow
def test_a_rubric_case_is_judged_on_a_worker_counted_as_evaluation_spend_and_budgeted(
    demo_agency: Agency, celery_worker: Worker
) -> None:
    result = _judged(demo_agency)

    assert result.status == "passed", result.checks
    judge = result.checks[-1]
    assert judge == {
        "check": "judge",
        "passed": True,
        "detail": "score 0.90 (at least 0.70): It completed and answered what the rubric asks.",
    }
    assert result.judge_score == 0.9
    assert result.judge_reason == "It completed and answered what the rubric asks."
    assert result.judge_cost_usd > 0
    assert result.experiment.status == "completed"
    assert result.execution is not None
    # The judge's call on the day's evaluation row, with the experiment run's own calls.
    calls, cost = _evaluation_usage(demo_agency)
    assert calls == result.execution.llm_call_count + 1
    assert cost == result.execution.cost_usd + result.judge_cost_usd
    # Against the evaluation budget (created at the default limit), settled: nothing held.
    assert _budget(demo_agency) == (result.judge_cost_usd, Decimal(0))
    # Read back over the API with the case's result.
    client = token_client(MembershipFactory.create(agency=demo_agency, role=Role.VIEWER).user)
    [read] = client.get(f"/api/v1/experiments/{result.experiment_id}/").json()["results"]
    assert (read["judge_score"], read["judge_reason"], read["checks"][-1]["check"]) == (
        0.9,
        result.judge_reason,
        "judge",
    )
    assert Decimal(read["judge_cost_usd"]) == result.judge_cost_usd


@pytest.mark.slow
def test_a_judge_whose_reply_is_not_json_fails_the_check_with_no_score(
    demo_agency: Agency, demo_model: DemoModelServer, celery_worker: Worker
) -> None:
    demo = demo_responder(think_seconds=0, stream_interval=0)

    def respond(request: RecordedRequest) -> Step:
        if (request.system or "").startswith(SYSTEM[:40]):
            return Reply(text="Looks good to me, 9 out of 10.", input_tokens=50, output_tokens=9)
        return demo(request)

    demo_model.set_responder(respond)
    try:
        result = _judged(demo_agency, more={"judge_min_score": 0.5})
    finally:
        demo_model.set_responder(demo)

    assert result.status == "failed"
    assert result.checks[-1] == {
        "check": "judge",
        "passed": False,
        "detail": "judge failed: the reply is not JSON: 'Looks good to me, 9 out of 10.'",
    }
    assert all(c["passed"] for c in result.checks[:-1])
    assert (result.judge_score, result.experiment.status) == (None, "completed")
    # The call was made and paid for: counted all the same.
    assert result.judge_cost_usd > 0
    assert _budget(demo_agency) == (result.judge_cost_usd, Decimal(0))


@pytest.mark.slow
def test_an_exhausted_evaluation_budget_calls_no_judge_and_fails_the_check(
    demo_agency: Agency, celery_worker: Worker
) -> None:
    with tenancy.agency_context(demo_agency.id):
        EvaluationBudget.objects.create(agency=demo_agency, limit_usd=Decimal(0))

    result = _judged(demo_agency)

    assert result.status == "failed"
    assert result.checks[-1] == {"check": "judge", "passed": False, "detail": BUDGET_EXHAUSTED}
    assert (result.judge_score, result.judge_cost_usd) == (None, Decimal(0))
    assert result.experiment.status == "completed"
    assert result.execution is not None
    # No judge call: the evaluation row holds the run's calls alone; the budget is untouched.
    assert _evaluation_usage(demo_agency) == (
        result.execution.llm_call_count,
        result.execution.cost_usd,
    )
    assert _budget(demo_agency) == (Decimal(0), Decimal(0))


NO_SCORE = "judge failed: no score from 0 to 1 in the reply"


@pytest.mark.parametrize(
    ("reply", "verdict"),
    [
        ('{"score": 0.8, "reason": "Fine."}', (0.8, "Fine.")),
        ('```json\n{"score": 1, "reason": "All of it."}\n```', (1.0, "All of it.")),
        ("Great run!", (None, "judge failed: the reply is not JSON: 'Great run!'")),
        ('["score", 1]', (None, "judge failed: the reply is not a JSON object")),
        ('{"score": 7, "reason": "x"}', (None, f"{NO_SCORE} (7)")),
        ('{"score": true, "reason": "x"}', (None, f"{NO_SCORE} (True)")),
        ('{"score": 0.5}', (None, "judge failed: no reason in the reply")),
    ],
)  # fmt: skip
def test_the_judges_reply_is_read_as_json_or_the_judge_failed(
    reply: str, verdict: tuple[float | None, str]
) -> None:
    assert parse_verdict(reply) == verdict


def test_the_judge_check_passes_at_the_threshold_default_or_the_cases_own() -> None:
    assert judge_check({"judge_rubric": "r"}, 0.7, "ok")["passed"] is True
    assert judge_check({"judge_rubric": "r"}, 0.69, "meh")["passed"] is False
    assert judge_check({"judge_rubric": "r", "judge_min_score": 0.5}, 0.6, "ok")["passed"] is True
    assert judge_check({"judge_rubric": "r"}, None, BUDGET_EXHAUSTED) == {
        "check": "judge",
        "passed": False,
        "detail": BUDGET_EXHAUSTED,
    }


@pytest.mark.parametrize(
    ("expectations", "fault"),
    [
        ({"judge_rubric": "r", "judge_min_score": 1.5}, "a number from 0 to 1 is expected."),
        ({"judge_rubric": "r", "judge_min_score": True}, "a number from 0 to 1 is expected."),
        ({"judge_rubric": "r", "judge_min_score": "0.5"}, "a number from 0 to 1 is expected."),
        ({"judge_min_score": 0.5}, "a judge_rubric is needed for a judge."),
    ],
)
def test_a_judge_threshold_is_a_score_and_needs_a_rubric(
    expectations: dict[str, Any], fault: str
) -> None:
    with pytest.raises(ApplicationError) as refused:
        validate_expectations(expectations)
    assert refused.value.message == f"expectations.judge_min_score: {fault}"
    assert validate_expectations({"judge_rubric": "r", "judge_min_score": 0}) is not None
