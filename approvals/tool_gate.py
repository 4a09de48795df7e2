"""Approvals' gate on the tool executor (tools/gates.py): a call that a risk rule, an agent
constraint or the tool's danger rates as needing a person waits for their decision (an
approval); an approved call is checked again before it runs; a denied one is refused; a call
whose tool asks a person (ask_user) waits for the answer, which becomes its result."""

from __future__ import annotations

import functools

from agents.models import Agent
from approvals import questions
from approvals.describe import describe_action
from approvals.models import Approval, ApprovalStatus, Question, QuestionKind, QuestionStatus
from approvals.risk import RiskDecision, assess_risk
from approvals.services import approval_requested, expiry_for
from ops import metrics
from tools import selectors
from tools.calls import CallRequest, Held, ToolOutcome, tool_error
from tools.gates import Decision, Park, Proceed, Refuse, Resumed, Settled, ToolGate
from tools.handlers import HumanQuestion
from tools.models import ToolCall, ToolCallStatus
from tools.policy import ToolPolicy
from usage import services as usage_services


class ApprovalGate(ToolGate):
    def resumed(self, request: CallRequest, existing: ToolCall) -> Resumed | None:
        """An approval's decision (whatever it is: a run resumes once it is made), or a
        question's answer."""
        if existing.status == ToolCallStatus.WAITING_APPROVAL:
            approval = Approval.objects.filter(tool_call=existing).order_by("-created_at").first()
            if approval is None:
                return None
            return Decision(refusal=_refusal(approval), arguments=approval.edited_arguments)
        return _answered(request, existing)

    def before_handler(
        self, request: CallRequest, policy: ToolPolicy
    ) -> Park | Refuse | Proceed | None:
        call = request.call
        decision = assess_risk(
            agency_id=request.agency_id,
            tool_name=call.name,
            arguments=call.arguments,
            dangerous=bool(policy.get("dangerous")),
            constraints=request.constraints,
        )
        if decision.needs_approval:
            write = functools.partial(_ask_for_approval, request, decision)
            return Park(ToolCallStatus.WAITING_APPROVAL, write)
        # A rule that matched and let it run (flow's decision point).
        return Proceed(decision) if decision.rule_id is not None else None

    def after_decision(self, request: CallRequest, decision: Decision) -> Refuse | None:
        return _recheck(request)

    def after_handler(
        self, request: CallRequest, policy: ToolPolicy, outcome: ToolOutcome
    ) -> Park | None:
        if outcome.ask is None:
            return None
        return Park(
            ToolCallStatus.WAITING_INPUT, functools.partial(_ask_question, request, outcome.ask)
        )


def _ask_for_approval(request: CallRequest, decision: RiskDecision, tool_call: ToolCall) -> Held:
    call = request.call
    approval = Approval.objects.create(
        agency_id=request.agency_id,
        execution_id=request.execution_id,
        agent_id=request.agent_id,
        site_id=request.site_id,
        tool_call=tool_call,
        risk_rule_id=decision.rule_id,
        action_type=call.name,
        action_description=describe_action(call.name, call.arguments),
        proposed_arguments=call.arguments,
        risk_level=decision.risk_level,
        risk_explanation=decision.reason,
        expires_at=expiry_for(Agent.objects.only("human_timeout_minutes").get(pk=request.agent_id)),
    )
    approval_requested(approval)
    return Held(
        reason=f"{call.name} needs approval ({approval.risk_level})",
        output={"status": "waiting_approval", "approval_id": str(approval.id)},
        record=approval,
    )


def _refusal(approval: Approval) -> Refuse | None:
    """A person did not approve the call (denied, or it expired): it is refused, and the run
    goes on."""
    if approval.status == ApprovalStatus.APPROVED:
        return None
    return Refuse(
        "approval_denied",
        f"A human {approval.status} this action"
        + (f": {approval.decision_reason}" if approval.decision_reason else "."),
    )


def _recheck(request: CallRequest) -> Refuse | None:
    """An approved call, about to run: may it still? The agent's tool patterns, the tool and the
    agency's modules as they are now (the approval may have waited hours, and a policy change
    meanwhile wins), and some of today's budget left. A refusal ends the call as not run, with
    the reason, for the model and on the approval's page. (A deactivated agent, site or agency
    ends the run at its claim, before this.)"""
    name = request.call.name
    access_now = selectors.tool_access_now(
        agency_id=request.agency_id, agent_id=request.agent_id, tool_name=name
    )
    if access_now is None or not access_now.allowed:
        why = access_now.message if access_now is not None else f"{name!r} is no longer active."
        return Refuse(
            "approval_recheck_failed",
            f"Approved, but not run: the tool is no longer allowed for this agent ({why})",
        )
    if usage_services.budget_exhausted(request.agency_id):
        metrics.budget_refused("approved_call")
        return Refuse(
            "approval_recheck_failed",
            "Approved, but not run: the agency's daily budget is exhausted.",
        )
    return None


def _ask_question(request: CallRequest, ask: HumanQuestion, tool_call: ToolCall) -> Held:
    """The ask_user call waits (no step yet: it is written with the answer as its result)."""
    call = request.call
    question = questions.question_create(
        execution_id=request.execution_id,
        agency_id=request.agency_id,
        site_id=request.site_id,
        agent_id=request.agent_id,
        kind=QuestionKind.QUESTION,
        question=ask.question,
        options=ask.options,
        allow_other=ask.allow_other,
        question_type=ask.question_type,
        triggered_by=f"{call.name} (the agent asked)",
        tool_call=tool_call,
    )
    return _waiting(request, question)


def _answered(request: CallRequest, existing: ToolCall) -> Settled | Held:
    """A resumed ask_user call: the person's answer is its result (or, still unanswered — a
    delivery that came early — the run waits again)."""
    question = Question.objects.filter(tool_call=existing).order_by("-created_at").first()
    if question is not None and question.status == QuestionStatus.PENDING:
        return _waiting(request, question)
    if question is not None and question.status == QuestionStatus.ANSWERED:
        return Settled({"answer": question.user_response}, ToolCallStatus.COMPLETED)
    return Settled(
        tool_error("not_answered", "Nobody answered the question."), ToolCallStatus.FAILED
    )


def _waiting(request: CallRequest, question: Question) -> Held:
    return Held(
        reason=f"{request.call.name}: waiting for a person's answer",
        output={"status": "waiting_input", "question_id": str(question.id)},
        input_request=questions.input_request_for(question),
        record=question,
    )
