"""Fail closed: an approval or question nobody answers in time expires and its action never runs;
cancelling a waiting run cancels what it waits for; an approved action re-checks that it may
still run (policy, budget); a deny needs a reason and may let the run continue where the agent
allows it; every step is an ``ai.approval.*`` event. A real Celery worker, PostgreSQL and Redis,
and the fake provider server."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable
from decimal import Decimal

import pytest
from django.utils import timezone

from agents.models import Agent, Execution, ExecutionStatus, StopReason
from agents.services import execution_cancel, execution_create
from approvals.models import Approval, ApprovalStatus, Question, QuestionStatus
from approvals.questions import question_answer
from approvals.services import approval_decide
from approvals.tasks import expire_waiting
from core import tenancy
from core.exceptions import ApplicationError
from core.models import ActorType, Event
from crm.models import EmailMessage
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import by_turn, text_reply, tool_call_reply
from tests.factories import UserFactory
from tests.processes import Worker, wait_for
from tools.models import ToolCall, ToolCallStatus
from usage.models import Budget

pytestmark = pytest.mark.slow
WAITING = {"waiting_approval", "waiting_input"}
APPROVE_EMAIL = {"type": "require_approval", "tools": ["email_*"]}
SEND = {"to": ["client@example.com"], "subject": "Renewal", "body": "Hello"}


def _email_agent(
    make_agent: Callable[..., Agent], server: FakeProviderServer, **fields: object
) -> Agent:
    agent = make_agent("openai", allowed_tools=["email_*"], constraints=[APPROVE_EMAIL], **fields)
    server.set_responder(
        by_turn(tool_call_reply("email_send", SEND), text_reply("Done for now.")),
        key=agent.llm_model,
    )
    return agent


def _asking_agent(
    make_agent: Callable[..., Agent], server: FakeProviderServer, **fields: object
) -> Agent:
    agent = make_agent("openai", allowed_tools=["ask_user"], **fields)
    server.set_responder(
        by_turn(
            tool_call_reply("ask_user", {"question": "Which plan?", "options": ["Basic", "Pro"]}),
            text_reply("Thanks."),
        ),
        key=agent.llm_model,
    )
    return agent


def _parked(agent: Agent) -> Execution:
    with tenancy.agency_context(agent.agency_id):
        execution = execution_create(agent=agent, input="Write to the client.")
    assert execution is not None
    return wait_for(execution, WAITING)


def _approval(execution: Execution) -> Approval:
    with tenancy.agency_context(execution.agency_id):
        return Approval.objects.get(execution=execution)


def _question(execution: Execution) -> Question:
    with tenancy.agency_context(execution.agency_id):
        return Question.objects.get(execution=execution)


def _call(execution: Execution) -> ToolCall:
    with tenancy.agency_context(execution.agency_id):
        return ToolCall.objects.get(execution=execution)


def _emails(execution: Execution) -> int:
    with tenancy.agency_context(execution.agency_id):
        return EmailMessage.objects.filter(agency_id=execution.agency_id).count()


def _run(execution: Execution) -> Execution:
    with tenancy.agency_context(execution.agency_id):
        return Execution.objects.get(pk=execution.pk)


def _events(execution: Execution, entity_id: object) -> dict[str, Event]:
    with tenancy.agency_context(execution.agency_id):
        rows = Event.objects.filter(source_entity_id=str(entity_id)).order_by("created_at")
        return {event.event_type: event for event in rows}


def _backdate(model: type[Approval] | type[Question], pk: uuid.UUID, agency_id: uuid.UUID) -> None:
    with tenancy.agency_context(agency_id):
        model.objects.filter(pk=pk).update(
            expires_at=timezone.now() - datetime.timedelta(minutes=1)
        )


def _close_to(moment: datetime.datetime | None, expected: datetime.datetime) -> bool:
    return moment is not None and abs(moment - expected) < datetime.timedelta(minutes=1)


# --- expiry --------------------------------------------------------------------------------------


def test_an_expired_approval_ends_the_run_and_its_action_never_runs(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = _email_agent(make_agent, fake_llm_server, human_timeout_minutes=90)
    execution = _parked(agent)
    approval = _approval(execution)
    # The agent's human_timeout_minutes set the deadline.
    assert _close_to(approval.expires_at, approval.created_at + datetime.timedelta(minutes=90))
    # Another run's approval, not due yet, is left alone.
    other = _parked(_email_agent(make_agent, fake_llm_server))
    _backdate(Approval, approval.pk, agent.agency_id)

    assert expire_waiting() >= 1

    approval = _approval(execution)
    assert approval.status == ApprovalStatus.EXPIRED
    execution = _run(execution)
    assert execution.status == ExecutionStatus.TIMED_OUT
    assert execution.stop_reason == StopReason.APPROVAL_EXPIRED
    call = _call(execution)
    assert (call.status, call.error_code) == (ToolCallStatus.CANCELLED, "approval_expired")
    assert _emails(execution) == 0
    expired = _events(execution, approval.id)["ai.approval.expired"]
    assert expired.payload["execution_id"] == str(execution.id)
    assert expired.actor_type == ActorType.SYSTEM
    with tenancy.agency_context(agent.agency_id), pytest.raises(ApplicationError) as late:
        approval_decide(approval=approval, approve=True, user_id=None)
    assert late.value.status == 409
    assert _approval(execution).status == ApprovalStatus.EXPIRED
    assert _emails(execution) == 0
    assert len(fake_llm_server.requests_for(agent.llm_model)) == 1  # never resumed

    assert _approval(other).status == ApprovalStatus.PENDING
    assert _run(other).status == ExecutionStatus.WAITING_APPROVAL


def test_an_unanswered_question_expires_and_ends_the_run_question_expired(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = _asking_agent(make_agent, fake_llm_server, human_timeout_minutes=15)
    execution = _parked(agent)
    question = _question(execution)
    assert _close_to(question.expires_at, question.created_at + datetime.timedelta(minutes=15))
    other = _parked(_asking_agent(make_agent, fake_llm_server))
    _backdate(Question, question.pk, agent.agency_id)

    assert expire_waiting() >= 1

    question = _question(execution)
    assert question.status == QuestionStatus.TIMED_OUT
    execution = _run(execution)
    assert execution.status == ExecutionStatus.TIMED_OUT
    assert execution.stop_reason == StopReason.QUESTION_EXPIRED
    call = _call(execution)
    assert (call.status, call.error_code) == (ToolCallStatus.CANCELLED, "question_expired")
    assert "ai.question.expired" in _events(execution, question.id)
    with tenancy.agency_context(agent.agency_id), pytest.raises(ApplicationError) as late:
        question_answer(question=question, answer="Pro", user_id=None)
    assert late.value.status == 409
    assert len(fake_llm_server.requests_for(agent.llm_model)) == 1

    assert _question(other).status == QuestionStatus.PENDING
    assert _run(other).status == ExecutionStatus.WAITING_INPUT


# --- cancel while waiting ------------------------------------------------------------------------


@pytest.mark.parametrize("waits_for", ["approval", "question"])
def test_cancelling_a_waiting_run_cancels_what_it_waits_for_and_nothing_runs(
    waits_for: str,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    make = _email_agent if waits_for == "approval" else _asking_agent
    agent = make(make_agent, fake_llm_server)
    execution = _parked(agent)

    with tenancy.agency_context(agent.agency_id):
        cancelled = execution_cancel(execution=execution)

    assert cancelled.status == ExecutionStatus.CANCELLED  # at once: no worker holds it
    if waits_for == "approval":
        approval = _approval(execution)
        assert approval.status == ApprovalStatus.CANCELLED
        with tenancy.agency_context(agent.agency_id), pytest.raises(ApplicationError) as late:
            approval_decide(approval=approval, approve=True, user_id=None)
    else:
        question = _question(execution)
        assert question.status == QuestionStatus.CANCELLED
        with tenancy.agency_context(agent.agency_id), pytest.raises(ApplicationError) as late:
            question_answer(question=question, answer="Pro", user_id=None)
    assert late.value.status == 409
    call = _call(execution)
    assert (call.status, call.error_code) == (ToolCallStatus.CANCELLED, "run_ended")
    assert _emails(execution) == 0
    assert _run(execution).status == ExecutionStatus.CANCELLED
    assert len(fake_llm_server.requests_for(agent.llm_model)) == 1


# --- re-check of an approved action ---------------------------------------------------------------


def test_a_tool_denied_after_the_request_is_not_run_when_approved(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = _email_agent(make_agent, fake_llm_server)
    execution = _parked(agent)
    with tenancy.agency_context(agent.agency_id):  # the policy changes while it waits
        changed = Agent.objects.get(pk=agent.pk)
        changed.denied_tools = ["email_*"]
        changed.save(update_fields=["denied_tools"])
        approval_decide(approval=_approval(execution), approve=True, user_id=None)

    execution = wait_for(execution)

    call = _call(execution)
    assert (call.status, call.error_code) == (ToolCallStatus.DENIED, "approval_recheck_failed")
    assert _emails(execution) == 0
    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    requests = fake_llm_server.requests_for(agent.llm_model)
    assert len(requests) == 2
    [result] = requests[1].tool_results  # the model is told it did not run, and why
    assert "approval_recheck_failed" in result
    assert "no longer allowed" in result


def test_an_approved_action_of_an_agent_deactivated_meanwhile_is_not_run(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = _email_agent(make_agent, fake_llm_server)
    execution = _parked(agent)
    with tenancy.agency_context(agent.agency_id):
        Agent.objects.filter(pk=agent.pk).update(is_active=False)
        approval_decide(approval=_approval(execution), approve=True, user_id=None)

    execution = wait_for(execution)

    assert execution.status == ExecutionStatus.CANCELLED
    assert "deactivated" in execution.error
    assert _call(execution).status == ToolCallStatus.CANCELLED
    assert _emails(execution) == 0
    assert len(fake_llm_server.requests_for(agent.llm_model)) == 1


def test_an_approved_action_is_not_run_once_the_budget_is_exhausted(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = _email_agent(make_agent, fake_llm_server)
    execution = _parked(agent)
    with tenancy.agency_context(agent.agency_id):
        Budget.objects.create(
            agency_id=agent.agency_id,
            date=timezone.localdate(),
            limit_usd=Decimal("1.00"),
            used_usd=Decimal("1.00"),
        )
        approval_decide(approval=_approval(execution), approve=True, user_id=None)

    execution = wait_for(execution)

    call = _call(execution)
    assert (call.status, call.error_code) == (ToolCallStatus.DENIED, "approval_recheck_failed")
    assert "budget" in call.error
    assert _emails(execution) == 0


# --- deny ----------------------------------------------------------------------------------------


def test_a_deny_needs_a_reason_and_continuing_needs_the_agents_consent(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = _email_agent(make_agent, fake_llm_server)  # deny_may_continue off (the default)
    execution = _parked(agent)
    approval = _approval(execution)

    with tenancy.agency_context(agent.agency_id):
        with pytest.raises(ApplicationError) as no_reason:
            approval_decide(approval=approval, approve=False, user_id=None, reason="  ")
        with pytest.raises(ApplicationError) as not_allowed:
            approval_decide(
                approval=approval, approve=False, user_id=None, reason="No.", continue_run=True
            )

    assert no_reason.value.code == "reason_required"
    assert not_allowed.value.code == "continue_not_allowed"
    assert _approval(execution).status == ApprovalStatus.PENDING  # nothing decided
    assert _run(execution).status == ExecutionStatus.WAITING_APPROVAL
    assert _call(execution).status == ToolCallStatus.WAITING_APPROVAL


def test_a_deny_that_lets_the_run_continue_tells_the_model_no(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = _email_agent(make_agent, fake_llm_server, deny_may_continue=True)
    approver = UserFactory.create()
    execution = _parked(agent)
    approval = _approval(execution)

    with tenancy.agency_context(agent.agency_id):
        approval_decide(
            approval=approval,
            approve=False,
            user_id=approver.id,
            reason="Not before the contract is signed.",
            continue_run=True,
        )
    execution = wait_for(execution)

    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert execution.output == "Done for now."
    call = _call(execution)
    assert (call.status, call.error_code) == (ToolCallStatus.DENIED, "approval_denied")
    assert _emails(execution) == 0
    requests = fake_llm_server.requests_for(agent.llm_model)
    assert len(requests) == 2
    [result] = requests[1].tool_results
    assert "approval_denied" in result
    assert "Not before the contract is signed." in result
    approval = _approval(execution)
    assert (approval.status, approval.decided_by_id) == (ApprovalStatus.DENIED, approver.id)

    # The events agents can subscribe to: requested by the agent, resolved by the person.
    events = _events(execution, approval.id)
    assert set(events) == {"ai.approval.requested", "ai.approval.resolved"}
    requested, resolved = events["ai.approval.requested"], events["ai.approval.resolved"]
    assert (requested.actor_type, requested.actor_id) == (ActorType.AGENT, str(agent.id))
    assert requested.payload["action_type"] == "email_send"
    assert requested.payload["status"] == ApprovalStatus.PENDING
    assert (resolved.actor_type, resolved.actor_user_id) == (ActorType.USER, approver.id)
    assert resolved.payload["status"] == ApprovalStatus.DENIED
    assert resolved.payload["continue_run"] is True
    assert resolved.payload["reason"] == "Not before the contract is signed."
