"""Stuck detection on beat: a run held in one state (a slow model call keeps it running) longer
than its agent's stuck_after_seconds, or than its expected workflow allows for that state, is
flagged once, announced (``ai.execution.stuck``), its agency's approvers notified, and with the
cancel setting the run is cancelled with the stop reason ``stuck``. The task is called as beat
calls it; the run goes through a real Celery worker."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.core.mail import EmailMessage as Mail
from django.utils import timezone
from pytest_django.fixtures import Settings

from agents.models import (
    Agent,
    AgentType,
    Execution,
    ExecutionStatus,
    StateTransition,
    StopReason,
    StuckAction,
)
from agents.services import execution_create
from core import tenancy
from core.models import Event, Role
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import by_turn, text_reply, tool_call_reply
from flow import stuck
from flow.home import stuck_runs
from flow.models import ExpectedWorkflow, StuckOutcome, StuckRun
from flow.tasks import detect_stuck_runs, notify_stuck
from tests.factories import MembershipFactory
from tests.processes import Worker, pending_execution, wait_for

SLOW = 6.0  # seconds the model takes to answer: the run stays "running" meanwhile


def _slow_agent(
    make_agent: Callable[..., Agent], server: FakeProviderServer, **fields: Any
) -> Agent:
    agent = make_agent("openai", allowed_tools=["crm_*"], **fields)
    # Below the form's minimum (10 s), to keep the test short: the detector reads the column.
    with tenancy.agency_context(agent.agency_id):
        Agent.objects.filter(pk=agent.pk).update(stuck_after_seconds=2)
        agent.refresh_from_db()
    server.set_responder(
        by_turn(
            tool_call_reply("crm_search_contacts", {"query": "Ada"}, latency=SLOW),
            text_reply("Nobody found."),
        ),
        key=agent.llm_model,
    )
    return agent


def _run_slowly(agent: Agent) -> Execution:
    with tenancy.agency_context(agent.agency_id):
        execution = execution_create(agent=agent, input="Find Ada.")
    assert execution is not None
    return wait_for(execution, {"running"})


def _flags(execution: Execution) -> list[StuckRun]:
    with tenancy.agency_context(execution.agency_id):
        return list(StuckRun.objects.filter(execution=execution))


@pytest.mark.slow
def test_a_run_held_in_running_is_flagged_once_announced_and_its_approvers_mailed(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
    mailoutbox: list[Mail],
    settings: Settings,
) -> None:
    settings.AGENTDESK_NOTIFY_BY_EMAIL = False  # the mail task is run below, in-process
    agent = _slow_agent(make_agent, fake_llm_server)
    with tenancy.agency_context(agent.agency_id):
        agency = agent.agency
    approver = MembershipFactory.create(
        agency=agency, role=Role.APPROVER, user__email="approver@example.com"
    )
    MembershipFactory.create(agency=agency, role=Role.VIEWER, user__email="v@example.com")
    execution = _run_slowly(agent)

    assert detect_stuck_runs() == 0  # not yet 2 s in running
    time.sleep(2.5)
    assert detect_stuck_runs() == 1
    assert detect_stuck_runs() == 0  # once per run and state

    [flag] = _flags(execution)
    assert flag.state == ExecutionStatus.RUNNING
    assert flag.expected_seconds == 2
    assert flag.expected_from == "agent"
    assert flag.action_taken == StuckOutcome.NOTIFIED
    with tenancy.agency_context(agent.agency_id):
        [event] = Event.objects.filter(event_type=stuck.STUCK_EVENT)
        assert [f.pk for f in stuck_runs(agency=agent.agency)] == [flag.pk]  # the staff home
    assert event.payload["execution_id"] == str(execution.id)
    assert event.payload["state"] == "running"
    assert event.payload["stuck_seconds"] >= 2

    assert (
        notify_stuck.apply(args=[str(flag.pk)], kwargs={"agency_id": str(agent.agency_id)}).get()
        == 1
    )
    [mail] = mailoutbox
    assert mail.to == [approver.user.email]
    assert f"Stuck run: {agent.name} in running" in mail.subject
    assert f"/admin/agents/execution/{execution.id}/change/" in mail.body

    execution = wait_for(execution)  # the slow call ends; notify leaves the run alone
    assert execution.status == ExecutionStatus.COMPLETED
    with tenancy.agency_context(agent.agency_id):
        assert stuck_runs(agency=agent.agency) == []  # ended: off the home


@pytest.mark.slow
def test_with_the_cancel_setting_a_stuck_run_is_cancelled_with_reason_stuck(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = _slow_agent(make_agent, fake_llm_server, stuck_action=StuckAction.CANCEL)
    execution = _run_slowly(agent)
    time.sleep(2.5)

    assert detect_stuck_runs() == 1
    [flag] = _flags(execution)
    assert flag.action_taken == StuckOutcome.CANCEL_REQUESTED  # its worker holds it

    execution = wait_for(execution)
    assert execution.status == ExecutionStatus.CANCELLED
    assert execution.stop_reason == StopReason.STUCK
    assert "in running longer than expected (2 s)" in execution.error
    assert len(fake_llm_server.requests_for(agent.llm_model)) == 1  # no model call after it


@pytest.mark.django_db
def test_a_waiting_run_is_flagged_only_by_its_workflows_duration_and_cancelled_at_once(
    make_agent: Callable[..., Agent],
) -> None:
    agent = make_agent("openai", agent_type=AgentType.SPECIALIST, stuck_action=StuckAction.CANCEL)
    with tenancy.agency_context(agent.agency_id):
        ExpectedWorkflow.objects.create(
            agency_id=agent.agency_id,
            name="Specialists",
            agent_type=AgentType.SPECIALIST,
            expected_states=[{"state": "pending", "max_duration_seconds": 30}],
        )
    execution = pending_execution(agent, input_text="Anything.")
    past = timezone.now() - datetime.timedelta(seconds=45)  # under the agent's 600 s default
    with tenancy.agency_context(agent.agency_id):
        StateTransition.objects.filter(execution=execution).update(entered_at=past)

    assert stuck.detect() == 1

    [flag] = _flags(execution)
    assert (flag.expected_seconds, flag.expected_from) == (30, "workflow")
    assert flag.action_taken == StuckOutcome.CANCELLED
    with tenancy.agency_context(agent.agency_id):
        execution.refresh_from_db()
    assert execution.status == ExecutionStatus.CANCELLED
    assert execution.stop_reason == StopReason.STUCK
    assert execution.error_details == {"stuck": {"state": "pending", "expected_seconds": 30}}


@pytest.mark.django_db
def test_a_run_within_its_expected_time_or_of_another_agency_is_not_flagged(
    make_agent: Callable[..., Agent],
) -> None:
    agent = make_agent("openai")
    execution = pending_execution(agent, input_text="Anything.")
    with tenancy.agency_context(agent.agency_id):
        StateTransition.objects.filter(execution=execution).update(
            entered_at=timezone.now() - datetime.timedelta(seconds=300)  # default: 600 s
        )
    other = make_agent("openai")
    late = pending_execution(other, input_text="Anything.")
    with tenancy.agency_context(other.agency_id):
        StateTransition.objects.filter(execution=late).update(
            entered_at=timezone.now() - datetime.timedelta(seconds=900)
        )

    assert stuck.detect() == 1
    assert _flags(execution) == []
    assert len(_flags(late)) == 1
    with tenancy.agency_context(agent.agency_id):
        assert stuck_runs(agency=agent.agency) == []  # another agency's flag is not shown
