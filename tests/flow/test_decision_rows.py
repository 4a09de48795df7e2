"""Decision point rows without a worker: the runtime's builder writes what the ORM would (it
skips the fields' conversions for speed), and a person's denial that ends a run records their
decision (no resumed run does)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.utils import timezone
from psycopg.types.json import Jsonb
from pytest_django.fixtures import Settings

from agents.models import (
    DecisionMethod,
    DecisionPoint,
    DecisionType,
    Execution,
    ExecutionStatus,
    StepType,
)
from approvals.models import Approval
from approvals.services import approval_decide
from core import fastdb, tenancy
from flow import decisions
from tests.agents.factories import ExecutionFactory, ExecutionStepFactory
from tests.approvals.factories import ApprovalFactory
from tests.factories import UserFactory
from tests.tools.factories import ToolCallFactory
from tools.models import ToolCallStatus

pytestmark = pytest.mark.django_db


def _plain(values: list[Any]) -> list[tuple[str, Any]]:
    """Each value with its type: what decides how psycopg sends it."""
    return [(type(v).__name__, v.obj if isinstance(v, Jsonb) else v) for v in values]


@pytest.mark.parametrize("rules", [[], [uuid.uuid4()]])
def test_the_runtimes_row_is_the_one_the_orm_conversions_make(rules: list[uuid.UUID]) -> None:
    at = timezone.now()
    values: dict[str, Any] = {
        "agency_id": uuid.uuid4(),
        "execution_id": uuid.uuid4(),
        "step_id": uuid.uuid4(),
        "decided_at": at,
        "decision_type": DecisionType.TOOL_SELECTION,
        "decision_question": "Which tool should I use?",
        "chosen_option": {"tool": "crm_get_contact", "arguments": {"email": "ada@x.io"}},
        "chosen_option_index": 0,
        "reasoning": "Let me look her up.",
        "decision_method": DecisionMethod.LLM_BASED,
        "confidence_score": 0.5,
        "rules_applied": rules,
    }
    options = ["crm_add_note", "crm_get_contact"]

    sql, built = decisions.row(available_options=decisions.json_once(options), **values)
    orm_sql, converted = fastdb.row(
        DecisionPoint,
        {**values, "id": built[0], "available_options": options},
    )

    assert sql == orm_sql
    # (fastdb.row stamps the auto_now columns with its own clock; the builder with the
    # decision's time)
    columns = [f.attname for f in fastdb._insert_sql(DecisionPoint)[1]]
    stamped = {columns.index("created_at"), columns.index("updated_at")}
    assert [v for i, v in enumerate(_plain(built)) if i not in stamped] == [
        v for i, v in enumerate(_plain(converted)) if i not in stamped
    ]
    assert [built[i] for i in sorted(stamped)] == [at, at]


def test_a_serialized_once_option_list_is_the_json_of_the_list() -> None:
    step = ExecutionStepFactory.create(step_type=StepType.THINK)
    options = decisions.json_once(["crm_add_note", "crm_get_contact"])
    with tenancy.agency_context(step.agency_id):
        for _ in range(2):  # the same parameter, in two rows
            fastdb.execute(
                decisions.row(
                    agency_id=step.agency_id,
                    execution_id=step.execution_id,
                    step_id=step.id,
                    decided_at=timezone.now(),
                    decision_type=DecisionType.TOOL_SELECTION,
                    decision_question="Which tool should I use?",
                    available_options=options,
                    chosen_option={"tool": "crm_add_note", "arguments": {}},
                    chosen_option_index=0,
                    decision_method=DecisionMethod.LLM_BASED,
                )
            )
        rows = list(DecisionPoint.objects.filter(step=step))

    assert [r.available_options for r in rows] == [["crm_add_note", "crm_get_contact"]] * 2
    assert all(r.rules_applied == [] and r.created_at == r.decided_at for r in rows)


def _waiting_approval(**agent: Any) -> Approval:
    execution = ExecutionFactory.create(status=ExecutionStatus.WAITING_APPROVAL, **agent)
    call = ToolCallFactory.create(
        execution=execution, tool_name="crm_add_note", status=ToolCallStatus.WAITING_APPROVAL
    )
    return ApprovalFactory.create(tool_call=call)


def _decisions(approval: Approval) -> list[DecisionPoint]:
    with tenancy.agency_context(approval.agency_id):
        return list(DecisionPoint.objects.filter(execution_id=approval.execution_id))


def test_a_denial_that_ends_the_run_records_the_persons_decision() -> None:
    approval = _waiting_approval()
    approver = UserFactory.create()

    with tenancy.agency_context(approval.agency_id):
        decided = approval_decide(
            approval=approval, approve=False, user_id=approver.id, reason="Not on this contact."
        )

    [decision] = _decisions(approval)
    assert decision.decision_type == DecisionType.RISK_ASSESSMENT
    assert decision.decision_method == DecisionMethod.USER_INPUT
    assert decision.decision_question == "Approve crm_add_note?"
    assert decision.available_options == ["approved", "denied"]
    assert decision.chosen_option == {
        "choice": "denied",
        "approval_id": str(approval.id),
        "edited": False,
        "decided_by": approver.id,
    }
    assert decision.chosen_option_index == 1
    assert decision.reasoning == "Not on this contact."
    assert decision.confidence_score == 1.0
    assert decision.step_id is None  # the call never ran: no act step
    assert decision.decided_at == decided.decided_at
    with tenancy.agency_context(approval.agency_id):
        assert Execution.objects.get(pk=approval.execution_id).status == ExecutionStatus.CANCELLED


def test_a_denial_with_decision_points_off_records_none(settings: Settings) -> None:
    settings.AGENTDESK_FLOW_DECISION_POINTS = False
    approval = _waiting_approval()

    with tenancy.agency_context(approval.agency_id):
        approval_decide(approval=approval, approve=False, user_id=None, reason="No.")

    assert _decisions(approval) == []


@pytest.mark.parametrize("approve", [True, False])
def test_a_decision_that_resumes_the_run_leaves_it_to_the_resumed_run(approve: bool) -> None:
    approval = _waiting_approval(agent__deny_may_continue=True)

    with tenancy.agency_context(approval.agency_id):
        approval_decide(
            approval=approval,
            approve=approve,
            user_id=None,
            reason="" if approve else "Not this one; go on.",
            continue_run=not approve,
        )

    # (flow/runtime.py records it with the call's step when the run resumes: no duplicate)
    assert _decisions(approval) == []
