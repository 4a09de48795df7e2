"""Approvals app factories. Children take their agency from their parent row."""

from __future__ import annotations

import factory

from approvals.models import (
    Approval,
    ApprovalStatus,
    Question,
    QuestionKind,
    QuestionStatus,
    RiskLevel,
    RiskRule,
)
from tests.factories import AgencyFactory, TenantFactory
from tests.tools.factories import ToolCallFactory
from tools.models import ToolCallStatus


class RiskRuleFactory(TenantFactory[RiskRule]):
    class Meta:
        model = RiskRule

    agency = factory.SubFactory(AgencyFactory)
    name = factory.Sequence(lambda n: f"Rule {n}")
    tool_pattern = "email_*"
    risk_level = RiskLevel.HIGH


class ApprovalFactory(TenantFactory[Approval]):
    class Meta:
        model = Approval

    tool_call = factory.SubFactory(ToolCallFactory)
    execution = factory.SelfAttribute("tool_call.execution")
    agency = factory.SelfAttribute("execution.agency")
    agent = factory.SelfAttribute("execution.agent")
    site = factory.SelfAttribute("execution.site")
    action_type = factory.SelfAttribute("tool_call.tool_name")
    action_description = "Send an e-mail to 12 recipients"
    proposed_arguments = factory.SelfAttribute("tool_call.input")
    risk_level = RiskLevel.HIGH
    status = ApprovalStatus.PENDING


class QuestionFactory(TenantFactory[Question]):
    """A pending question of a run waiting for its answer (``ask_user``); a ``correction`` has
    no tool call."""

    class Meta:
        model = Question

    tool_call = factory.SubFactory(
        ToolCallFactory, tool_name="ask_user", status=ToolCallStatus.WAITING_INPUT
    )
    execution = factory.SelfAttribute("tool_call.execution")
    agency = factory.SelfAttribute("execution.agency")
    agent = factory.SelfAttribute("execution.agent")
    site = factory.SelfAttribute("execution.site")
    kind = QuestionKind.QUESTION
    question = "Which plan should the offer be for?"
    options = factory.LazyFunction(lambda: ["Basic", "Pro"])
    status = QuestionStatus.PENDING
