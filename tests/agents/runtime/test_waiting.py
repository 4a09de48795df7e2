"""Runs that wait hold no worker: the approval gate parks a risky call until a human decides,
the `wait` tool parks until its timer, and platform events start subscribed agents."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable

import pytest
from django.utils import timezone

from agents.models import Agent, Execution, ExecutionStatus, StopReason, TriggerLog
from agents.services import execution_create
from agents.tasks import reap_expired_leases
from approvals.models import Approval, ApprovalStatus
from approvals.services import approval_decide
from core import tenancy
from core.events import event_emit
from core.exceptions import ApplicationError
from crm.models import EmailMessage, EmailStatus
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import by_turn, text_reply, tool_call_reply
from tests.api.conftest import key_client
from tests.processes import Worker, wait_for
from tools.models import ToolCall

pytestmark = pytest.mark.slow
WAITING = {"waiting_approval", "waiting_input"}
APPROVE_EMAIL = {
    "type": "require_approval",
    "tools": ["email_*"],
    "description": "E-mail needs a human",
}


def _email_agent(make_agent: Callable[..., Agent], server: FakeProviderServer) -> Agent:
    agent = make_agent("openai", allowed_tools=["email_*"], constraints=[APPROVE_EMAIL])
    server.set_responder(
        by_turn(
            tool_call_reply(
                "email_send",
                {"to": ["client@example.com"], "subject": "Renewal", "body": "Hello"},
            ),
            text_reply("Sent."),
        ),
        key=agent.llm_model,
    )
    return agent


def _start(agent: Agent) -> Execution:
    with tenancy.agency_context(agent.agency_id):
        execution = execution_create(agent=agent, input="Write to the client.")
    assert execution is not None
    return execution


def _approval(execution: Execution) -> Approval:
    with tenancy.agency_context(execution.agency_id):
        return Approval.objects.get(execution=execution)


def test_risky_call_parks_until_approved_then_runs_exactly_once(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = _email_agent(make_agent, fake_llm_server)
    execution = wait_for(_start(agent), WAITING)
    assert execution.status == ExecutionStatus.WAITING_APPROVAL
    assert execution.lease_owner == ""  # no worker holds it
    approval = _approval(execution)
    assert approval.status == ApprovalStatus.PENDING
    assert approval.action_type == "email_send"
    with tenancy.agency_context(agent.agency_id):
        assert not EmailMessage.objects.filter(execution=execution).exists()
        approval_decide(approval=approval, approve=True, user_id=None, reason="fine")
        with pytest.raises(ApplicationError) as second:
            approval_decide(approval=approval, approve=True, user_id=None)  # a double click
    assert second.value.status == 409
    execution = wait_for(execution)
    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    with tenancy.agency_context(agent.agency_id):
        emails = list(EmailMessage.objects.filter(execution=execution))
        calls = list(ToolCall.objects.filter(execution=execution).values_list("status", flat=True))
    assert len(emails) == 1
    assert calls == ["completed"]
    deadline = time.monotonic() + 10
    while emails[0].status != EmailStatus.SENT and time.monotonic() < deadline:
        time.sleep(0.05)
        with tenancy.agency_context(agent.agency_id):
            emails[0].refresh_from_db()
    assert emails[0].status == EmailStatus.SENT
    # The model saw the tool's real result after the approval, not the parking notice.
    assert len(fake_llm_server.requests_for(agent.llm_model)) == 2


def test_denied_call_cancels_the_run_and_sends_nothing(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = _email_agent(make_agent, fake_llm_server)
    execution = wait_for(_start(agent), WAITING)
    with tenancy.agency_context(agent.agency_id):
        approval_decide(approval=_approval(execution), approve=False, user_id=None, reason="no")
        execution.refresh_from_db()
        sent = EmailMessage.objects.filter(execution=execution).exists()
    assert execution.status == ExecutionStatus.CANCELLED
    assert execution.stop_reason == StopReason.APPROVAL_DENIED
    assert not sent


def test_a_run_waiting_for_approval_is_cancelled_at_once_through_the_api(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = _email_agent(make_agent, fake_llm_server)
    execution = wait_for(_start(agent), WAITING)

    response = key_client(agent.agency).post(f"/api/v1/executions/{execution.id}/cancel/")

    assert response.status_code == 200
    assert response.json()["status"] == ExecutionStatus.CANCELLED  # no worker needed
    with tenancy.agency_context(agent.agency_id):
        approval = _approval(execution)
        calls = list(ToolCall.objects.filter(execution=execution).values_list("status", flat=True))
        sent = EmailMessage.objects.filter(execution=execution).exists()
    assert approval.status == ApprovalStatus.CANCELLED
    assert calls == ["cancelled"]
    assert not sent
    assert len(fake_llm_server.requests_for(agent.llm_model)) == 1


def test_a_long_wait_parks_without_a_worker_and_beats_timer_check_resumes_it(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = make_agent("openai", allowed_tools=["wait"])
    # Longer than AGENTDESK_PRECISE_WAKE_MAX_SECONDS: no delayed wake-up, beat's check alone.
    fake_llm_server.set_responder(
        by_turn(tool_call_reply("wait", {"seconds": 3600}), text_reply("Waited.")),
        key=agent.llm_model,
    )
    execution = wait_for(_start(agent), WAITING)
    assert execution.status == ExecutionStatus.WAITING_INPUT
    assert execution.wait_until is not None
    assert execution.lease_owner == ""
    reap_expired_leases()
    with tenancy.agency_context(agent.agency_id):
        execution.refresh_from_db()
    assert execution.status == ExecutionStatus.WAITING_INPUT  # not due yet
    with tenancy.agency_context(agent.agency_id):  # an hour later
        Execution.objects.filter(pk=execution.pk).update(
            wait_until=timezone.now() - datetime.timedelta(seconds=1)
        )
    assert reap_expired_leases() >= 1  # beat's timer check
    execution = wait_for(execution)
    assert execution.status == ExecutionStatus.COMPLETED
    last = fake_llm_server.requests_for(agent.llm_model)[-1]
    assert "The wait is over" in last.last_user_text


def test_a_short_wait_is_woken_on_time_without_beat(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = make_agent("anthropic", allowed_tools=["wait"])
    fake_llm_server.set_responder(
        by_turn(tool_call_reply("wait", {"seconds": 2}), text_reply("Waited.")),
        key=agent.llm_model,
    )
    # No beat runs in the tests: the run's own delayed message wakes it.
    execution = wait_for(_start(agent), timeout=20)
    assert execution.status == ExecutionStatus.COMPLETED
    with tenancy.agency_context(agent.agency_id):
        states = list(execution.state_transitions.values_list("to_state", "transition_reason"))
    # Parked, then woken by its timer (not by anything else), then ran to the end.
    assert [state for state, _ in states[2:4]] == [ExecutionStatus.WAITING_INPUT, "pending"]
    assert states[3][1] == "wait timer due"
    last = fake_llm_server.requests_for(agent.llm_model)[-1]
    assert "The wait is over" in last.last_user_text


def test_platform_event_starts_subscribed_agents_and_logs_the_trigger(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = make_agent("anthropic", trigger_events=["crm.form.submitted"])
    fake_llm_server.set_responder(by_turn(text_reply("Thanks noted.")), key=agent.llm_model)
    with tenancy.agency_context(agent.agency_id):
        event = event_emit(
            agency_id=agent.agency_id, event_type="crm.form.submitted", payload={"form": "demo"}
        )
    deadline = time.monotonic() + 30
    execution = None
    while execution is None and time.monotonic() < deadline:
        with tenancy.agency_context(agent.agency_id):
            execution = Execution.objects.filter(trigger_event=event).first()
        time.sleep(0.05)
    assert execution is not None
    execution = wait_for(execution)
    assert execution.status == ExecutionStatus.COMPLETED
    assert execution.trigger_data["payload"] == {"form": "demo"}
    with tenancy.agency_context(agent.agency_id):
        log = TriggerLog.objects.get(execution=execution)
    assert log.outcome == "invoked"
    assert log.event_type == "crm.form.submitted"


def test_email_send_is_dangerous_by_default(live_db: None) -> None:
    from tools.models import Tool

    with tenancy.platform_context():
        assert Tool.objects.get(name="email_send", agency__isnull=True).is_dangerous is True
