"""A result counts the loops its run's loop detection flagged (issue 28: "loops flagged" among an
experiment's scores), in the result, its API and the comparison's figures."""

from __future__ import annotations

import pytest

from agents.models import ExecutionStatus
from core import tenancy
from evals.compare import figures
from evals.models import ExperimentResult, ResultStatus
from evals.services.experiments import experiment_result_score
from tests.agents.factories import ExecutionFactory
from tests.evals.factories import ExperimentFactory, TestCaseFactory
from tests.flow.factories import LoopDetectionFactory

pytestmark = pytest.mark.django_db


def _result(loops: int) -> ExperimentResult:
    case = TestCaseFactory.create()
    experiment = ExperimentFactory.create(dataset_version=case.version)
    with tenancy.agency_context(case.agency_id):
        execution = ExecutionFactory.create(
            agent=experiment.agent, status=ExecutionStatus.COMPLETED, output="Done."
        )
        for n in range(loops):
            LoopDetectionFactory.create(execution=execution, fingerprint=f"{n:064d}")
        result = ExperimentResult.objects.create(
            agency_id=case.agency_id, experiment=experiment, case=case, execution=execution
        )
        scored = experiment_result_score(result_id=result.pk)
    assert scored is not None
    return scored


def test_a_results_loops_are_counted_when_it_is_scored_even_when_it_passes() -> None:
    looped, straight = _result(loops=2), _result(loops=0)
    assert (looped.status, looped.loops_flagged) == (ResultStatus.PASSED, 2)
    assert straight.loops_flagged == 0
    with tenancy.agency_context(looped.agency_id):
        assert figures(looped.experiment, [looped]).loops_flagged == 2
