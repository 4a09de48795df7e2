"""A run whose agent (or agency, or site) was switched off after it was triggered does not go
on: the worker that claims it ends it as cancelled before any model call, whether the run was
pending since its trigger or resumed (a wait timer, a re-delivery).

Driven in this process (``agents.runtime.loop.run_execution``, what the Celery task calls) on
committed data, with the fake provider server counting the model calls."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agents.models import Agent, Execution, ExecutionStatus, StopReason
from agents.runtime.loop import run_execution
from agents.services import execution_resume
from approvals.models import Approval, ApprovalStatus
from core import tenancy
from core.models import Agency, Site
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import by_turn, text_reply, tool_call_reply
from tests.approvals.factories import ApprovalFactory
from tests.processes import wait_for
from tests.tools.factories import ToolCallFactory
from tools.models import ToolCall, ToolCallStatus

pytestmark = pytest.mark.slow


def _switch_off(agent: Agent, what: str) -> None:
    with tenancy.platform_context():
        if what == "agent":
            updated = Agent.objects.filter(pk=agent.pk).update(is_active=False)
        elif what == "agency":
            updated = Agency.objects.filter(pk=agent.agency_id).update(is_active=False)
        else:
            updated = Site.objects.filter(pk=agent.site_id).update(is_active=False)
    assert updated == 1


def _pending_run(agent: Agent) -> Execution:
    # Written directly: the trigger (execution_create) would refuse an inactive agent, and
    # its Celery message is not wanted here.
    with tenancy.agency_context(agent.agency_id):
        return Execution.objects.create(
            agency_id=agent.agency_id, agent=agent, site_id=agent.site_id,
            trigger_type="manual", input="Say done.",
        )  # fmt: skip


@pytest.mark.parametrize(
    ("what", "error"),
    [
        ("agent", "The agent was deactivated before this run started."),
        ("agency", "The agency was suspended before this run started."),
        ("site", "The agent's site was deactivated before this run started."),
    ],
)
def test_a_pending_run_of_a_switched_off_agent_is_cancelled_at_its_claim(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    what: str,
    error: str,
) -> None:
    agent = make_agent("openai")
    fake_llm_server.set_responder(by_turn(text_reply("Done.")), key=agent.llm_model)
    execution = _pending_run(agent)
    _switch_off(agent, what)

    assert run_execution(execution.id, agency_id=agent.agency_id) == ExecutionStatus.CANCELLED
    with tenancy.agency_context(agent.agency_id):
        ended = Execution.objects.get(pk=execution.pk)
    assert (ended.status, ended.stop_reason, ended.error) == (
        ExecutionStatus.CANCELLED,
        StopReason.CANCELLED,
        error,
    )
    assert ended.completed_at is not None
    assert ended.lease_owner == ""
    assert fake_llm_server.requests_for(agent.llm_model) == []
    # A second delivery (the reaper's) finds it ended.
    assert run_execution(execution.id, agency_id=agent.agency_id) == "not_claimed"


def test_a_run_resumed_after_its_agent_was_deactivated_is_cancelled(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer
) -> None:
    agent = make_agent("openai", allowed_tools=["wait"])
    fake_llm_server.set_responder(
        by_turn(tool_call_reply("wait", {"seconds": 1}), text_reply("Waited.")),
        key=agent.llm_model,
    )
    execution = _pending_run(agent)
    assert run_execution(execution.id, agency_id=agent.agency_id) == ExecutionStatus.WAITING_INPUT
    _switch_off(agent, "agent")
    with tenancy.agency_context(agent.agency_id):
        execution_resume(
            execution=Execution.objects.get(pk=execution.pk),
            observation="The wait is over.",
            reason="wait timer due",
        )
    # The resume's own delivery may reach a worker of this test run first: either way the run
    # ends the same, and this call then finds it taken.
    run_execution(execution.id, agency_id=agent.agency_id)
    ended = wait_for(execution)
    assert (ended.status, ended.stop_reason, ended.error) == (
        ExecutionStatus.CANCELLED,
        StopReason.CANCELLED,
        "The agent was deactivated before this run resumed.",
    )
    assert len(fake_llm_server.requests_for(agent.llm_model)) == 1  # the call before the wait


def test_a_run_cancelled_at_its_claim_leaves_no_decision_in_the_approval_queue(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer
) -> None:
    # An approval decided (or still pending) for a run whose agent was switched off meanwhile.
    agent = make_agent("openai")
    execution = _pending_run(agent)
    with tenancy.platform_context():  # the factories follow the rows' foreign keys
        call = ToolCallFactory.create(execution=execution, status=ToolCallStatus.WAITING_APPROVAL)
        approval = ApprovalFactory.create(tool_call=call)
    _switch_off(agent, "agent")

    assert run_execution(execution.id, agency_id=agent.agency_id) == ExecutionStatus.CANCELLED
    with tenancy.agency_context(agent.agency_id):
        assert ToolCall.objects.get(pk=call.pk).status == ToolCallStatus.CANCELLED
        assert Approval.objects.get(pk=approval.pk).status == ApprovalStatus.CANCELLED
    assert fake_llm_server.requests_for(agent.llm_model) == []
