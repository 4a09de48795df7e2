"""Decision points (seed 003), written by the runtime with the step they belong to: the tool the
model chose among the allowed ones (with its reasoning text), its final answer, what it did after
a failed call, a risk rule's verdict routing a call to a person, and that person's decision,
and a risk rule's verdict letting a call run. Through a real Celery worker and the fake provider
server (a denial that ends the run: tests/flow/test_decision_rows.py)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from agents.models import (
    Agent,
    DecisionMethod,
    DecisionPoint,
    DecisionType,
    Execution,
    ExecutionStatus,
    ExecutionStep,
    StepType,
)
from agents.services import execution_create
from approvals.models import Approval, RiskLevel, RiskRule
from approvals.risk import clear_cache
from approvals.services import approval_decide
from core import tenancy
from crm.models import Contact
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import by_turn, text_reply, tool_call_reply
from tests.factories import UserFactory
from tests.processes import TERMINAL, Worker, wait_for

pytestmark = pytest.mark.slow


def _start(agent: Agent) -> Execution:
    with tenancy.agency_context(agent.agency_id):
        execution = execution_create(agent=agent, input="Note the renewal on Ada's contact.")
    assert execution is not None
    return execution


def _decisions(execution: Execution) -> list[DecisionPoint]:
    with tenancy.agency_context(execution.agency_id):
        return list(DecisionPoint.objects.filter(execution=execution).order_by("decided_at"))


def _think_steps(execution: Execution) -> list[uuid.UUID]:
    with tenancy.agency_context(execution.agency_id):
        return list(
            ExecutionStep.objects.filter(execution=execution, step_type=StepType.THINK)
            .order_by("step_number")
            .values_list("id", flat=True)
        )


@pytest.fixture
def contact_agent(make_agent: Callable[..., Agent]) -> tuple[Agent, Contact]:
    agent = make_agent("openai", allowed_tools=["crm_get_contact", "crm_add_note"])
    with tenancy.agency_context(agent.agency_id):
        contact = Contact.objects.create(
            agency_id=agent.agency_id, first_name="Ada", email="ada@example.com"
        )
    return agent, contact


def test_the_models_tool_choice_its_retry_and_its_answer_are_recorded_with_their_steps(
    contact_agent: tuple[Agent, Contact],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent, _ = contact_agent
    missing = str(uuid.uuid4())
    fake_llm_server.set_responder(
        by_turn(
            tool_call_reply(
                "crm_add_note",
                {"contact_id": missing, "content": "Renewal agreed."},
                text="I will note it on the contact.",
            ),
            tool_call_reply(
                "crm_get_contact", {"email": "ada@example.com"}, text="Let me find the id."
            ),
            text_reply("Found Ada; noted nothing yet."),
        ),
        key=agent.llm_model,
    )

    execution = wait_for(_start(agent))

    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    first, second, third = _think_steps(execution)
    decisions = _decisions(execution)
    kinds = [(d.decision_type, d.step_id) for d in decisions]
    assert kinds == [
        (DecisionType.TOOL_SELECTION, first),
        (DecisionType.ERROR_RECOVERY, second),
        (DecisionType.TOOL_SELECTION, second),
        (DecisionType.COMPLETION, third),
    ]
    choice = decisions[0]
    assert choice.decision_question == "Which tool should I use?"
    assert choice.available_options == ["crm_add_note", "crm_get_contact"]
    assert choice.chosen_option == {
        "tool": "crm_add_note",
        "arguments": {"contact_id": missing, "content": "Renewal agreed."},
    }
    assert choice.chosen_option_index == 0
    assert choice.reasoning == "I will note it on the contact."
    assert choice.decision_method == DecisionMethod.LLM_BASED
    recovery = decisions[1]
    assert recovery.decision_question == "crm_add_note failed: what next?"
    assert recovery.chosen_option == {
        "choice": "another tool: crm_get_contact",
        "tools": ["crm_get_contact"],
    }
    assert recovery.chosen_option_index == 1
    assert decisions[3].chosen_option == {"answer": "Found Ada; noted nothing yet."}


def test_a_risk_rules_verdict_and_the_approvers_decision_are_recorded(
    contact_agent: tuple[Agent, Contact],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent, contact = contact_agent
    with tenancy.agency_context(agent.agency_id):
        rule = RiskRule.objects.create(
            agency_id=agent.agency_id,
            name="Notes need a look",
            tool_pattern="crm_add_note",
            risk_level=RiskLevel.HIGH,
            requires_approval=True,
        )
    clear_cache()  # this process's cache; the worker reads the new rule within its TTL
    note: dict[str, Any] = {"contact_id": str(contact.id), "content": "Renewal agreed."}
    fake_llm_server.set_responder(
        by_turn(tool_call_reply("crm_add_note", note), text_reply("Noted.")),
        key=agent.llm_model,
    )

    execution = wait_for(_start(agent), {"waiting_approval", *TERMINAL})

    assert execution.status == ExecutionStatus.WAITING_APPROVAL
    verdict = _decisions(execution)[-1]
    assert verdict.decision_type == DecisionType.RISK_ASSESSMENT
    assert verdict.decision_method == DecisionMethod.RULE_BASED
    assert verdict.available_options == ["run", "ask a person"]
    assert verdict.chosen_option["choice"] == "ask a person"
    assert verdict.chosen_option["risk_level"] == RiskLevel.HIGH
    assert verdict.rules_applied == [rule.id]
    assert "Notes need a look" in verdict.reasoning

    approver = UserFactory.create()
    with tenancy.agency_context(agent.agency_id):
        approval = Approval.objects.get(execution=execution)
        approval_decide(approval=approval, approve=True, user_id=approver.id, reason="Fine.")
    execution = wait_for(execution)

    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    decided = [d for d in _decisions(execution) if d.decision_method == DecisionMethod.USER_INPUT]
    assert len(decided) == 1
    assert decided[0].decision_question == "Approve crm_add_note?"
    assert decided[0].chosen_option["choice"] == "approved"
    assert decided[0].chosen_option["approval_id"] == str(approval.id)
    assert decided[0].reasoning == "Fine."
    assert decided[0].step_id is not None  # the act step the approved call ran in


def test_a_risk_rule_that_lets_a_call_run_is_recorded_and_a_call_no_rule_matches_is_not(
    contact_agent: tuple[Agent, Contact],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent, contact = contact_agent
    with tenancy.agency_context(agent.agency_id):
        rule = RiskRule.objects.create(
            agency_id=agent.agency_id,
            name="Notes are low risk",
            tool_pattern="crm_add_note",
            risk_level=RiskLevel.LOW,
            requires_approval=False,
        )
    clear_cache()
    note: dict[str, Any] = {"contact_id": str(contact.id), "content": "Renewal agreed."}
    fake_llm_server.set_responder(
        by_turn(
            tool_call_reply("crm_get_contact", {"email": "ada@example.com"}),
            tool_call_reply("crm_add_note", note),
            text_reply("Noted."),
        ),
        key=agent.llm_model,
    )

    execution = wait_for(_start(agent))

    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    verdicts = [d for d in _decisions(execution) if d.decision_type == DecisionType.RISK_ASSESSMENT]
    assert len(verdicts) == 1  # crm_get_contact matched no rule: no row for it
    [verdict] = verdicts
    assert verdict.decision_method == DecisionMethod.RULE_BASED
    assert verdict.decision_question == "May crm_add_note run without a person's approval?"
    assert verdict.available_options == ["run", "ask a person"]
    assert verdict.chosen_option == {"choice": "run", "risk_level": RiskLevel.LOW}
    assert verdict.chosen_option_index == 0
    assert verdict.rules_applied == [rule.id]
    assert "Notes are low risk" in verdict.reasoning
    with tenancy.agency_context(agent.agency_id):
        act = ExecutionStep.objects.get(execution=execution, tool_name="crm_add_note")
    assert verdict.step_id == act.id  # the step the call ran in
