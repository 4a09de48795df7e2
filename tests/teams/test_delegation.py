"""``delegate_to_agent`` end to end through real Celery workers, PostgreSQL, Redis and the fake
provider server: the lead waits holding no worker, the helper's answer resumes it as the call's
result, the helper can use only the lead's tools and spend only its share, cancelling the lead
cancels the helpers down the chain, and the wait ends with the lead's deadline."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from decimal import Decimal

import pytest

from agents.models import (
    Agent,
    AgentMessage,
    ExecutionStatus,
    MessageChannel,
    MessageType,
    StopReason,
    TriggerType,
)
from agents.services import execution_cancel
from core import tenancy
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import (
    RecordedRequest,
    Reply,
    Step,
    by_turn,
    text_reply,
    tool_call_reply,
)
from tests.processes import Worker, wait_for
from tests.teams.helpers import (
    answer_with_result,
    calls,
    children,
    delegate,
    helper_agent,
    lead_agent,
    messages,
    refresh,
    start,
)
from tools.models import ToolCallStatus
from usage.models import Budget, ModelPrice

pytestmark = pytest.mark.slow


@pytest.fixture
def single_slot_worker(live_db: None) -> Iterator[str]:
    """A worker with one thread, alone on its own queue."""
    queue = f"teams-{time.monotonic_ns()}"
    worker = Worker(queue=queue, concurrency=1).start()
    yield queue
    worker.stop()


def test_the_lead_waits_holding_no_worker_and_resumes_with_the_helpers_answer(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    single_slot_worker: str,
) -> None:
    lead = lead_agent(make_agent)
    helper = helper_agent(lead)
    fake_llm_server.set_responder(_lead_then_answer(helper.slug), key=lead.llm_model)
    # The helper takes a while: long enough to see the lead waiting meanwhile.
    fake_llm_server.set_responder(
        by_turn(Reply(text="It renews on 2027-01-31.", latency=2.0)), key=helper.llm_model
    )

    # One worker thread for the whole team: the helper can only run if the lead let go of it.
    run = start(lead, "Find out when Ada's contract renews.", queue=single_slot_worker)

    waiting = wait_for(run, {"waiting_agent", *_ENDED})
    assert waiting.status == ExecutionStatus.WAITING_AGENT
    assert waiting.lease_owner == ""
    assert waiting.input_request["kind"] == "agent"
    assert waiting.wait_until is not None
    [child] = children(run)
    running = wait_for(child, {"running", *_ENDED})
    assert running.status == ExecutionStatus.RUNNING  # on the single thread the lead gave up
    assert refresh(run).status == ExecutionStatus.WAITING_AGENT
    assert refresh(run).lease_owner == ""

    run = wait_for(run)
    child = refresh(child)
    assert child.status == ExecutionStatus.COMPLETED, child.error
    assert (child.trigger_type, child.parent_id, child.depth) == (TriggerType.AGENT, run.id, 1)
    assert child.trigger_data["input"] == {"contact": "Ada"}
    assert child.initial_context["delegation"]["queue"] == single_slot_worker
    assert "When does Ada's contract renew?" in child.input
    assert run.status == ExecutionStatus.COMPLETED, run.error
    assert run.output == "The helper says: It renews on 2027-01-31."
    # The model's next request carried the helper's answer as the call's result.
    lead_requests = fake_llm_server.requests_for(lead.llm_model)
    assert len(lead_requests) == 2
    result = json.loads(lead_requests[1].tool_results[0])
    assert result["output"] == "It renews on 2027-01-31."
    assert result["status"] == "completed"
    assert result["execution_id"] == str(child.id)
    [call] = calls(run)
    assert (call.tool_name, call.status) == ("delegate_to_agent", ToolCallStatus.COMPLETED)
    assert (call.output or {})["output"] == "It renews on 2027-01-31."

    # Seed 003's messages: the request, and the result in response to it, in both timelines.
    request, response = messages(run)
    assert request.message_type == MessageType.TASK_DELEGATION
    assert request.is_request is True
    assert (request.from_execution_id, request.to_execution_id) == (run.id, child.id)
    assert (request.from_agent_id, request.to_agent_id) == (lead.id, helper.id)
    assert request.content["instruction"] == "When does Ada's contract renew?"
    assert request.content["input"] == {"contact": "Ada"}
    assert request.channel == MessageChannel.TASK_QUEUE
    assert request.responded_at is not None
    assert response.message_type == MessageType.RESULT
    assert response.is_request is False
    assert (response.from_execution_id, response.to_execution_id) == (child.id, run.id)
    assert response.in_response_to_id == request.id
    assert response.request_id == request.request_id
    assert response.content["output"] == "It renews on 2027-01-31."
    assert [m.id for m in messages(child)] == [request.id, response.id]


def _lead_then_answer(slug: str) -> Callable[[RecordedRequest], Step]:
    first = tool_call_reply(
        "delegate_to_agent",
        delegate(slug, "When does Ada's contract renew?", {"contact": "Ada"}),
    )
    answer = answer_with_result("The helper says:")

    def respond(request: RecordedRequest) -> Step:
        return answer(request) if request.last_message_is_tool_result else first

    return respond


_ENDED = {"completed", "failed", "cancelled", "timed_out"}


def test_the_helper_cannot_use_a_tool_the_lead_cannot(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    # crm_search_contacts, not crm_create_contact; smaller limits than the helper's own
    lead = lead_agent(make_agent, max_steps_per_run=6, max_tool_calls_per_step=2)
    helper = helper_agent(lead, allowed_tools=["crm_*"])  # its own patterns allow both
    fake_llm_server.set_responder(_lead_then_answer(helper.slug), key=lead.llm_model)
    fake_llm_server.set_responder(
        by_turn(
            tool_call_reply("crm_create_contact", {"first_name": "Ada", "email": "ada@x.test"}),
            text_reply("I could not create the contact."),
        ),
        key=helper.llm_model,
    )

    run = wait_for(start(lead, "Add Ada as a contact."))

    assert run.status == ExecutionStatus.COMPLETED, run.error
    [child] = children(run)
    offered = {t["name"] for t in child.config_snapshot["tools"]}
    assert offered == {"crm_search_contacts"}  # crm_* intersected with the lead's tools
    assert set(child.config_snapshot["delegation"]["allowed_tools"]) == {
        "crm_search_contacts",
        "delegate_to_agent",
        "wait",
    }
    assert fake_llm_server.requests_for(helper.llm_model)[0].tool_names == ["crm_search_contacts"]
    # Its limits are no more than the lead's: steps, calls per step, the time the lead had left.
    assert (helper.max_steps_per_run, helper.max_tool_calls_per_step) == (10, 3)
    assert child.config_snapshot["max_steps_per_run"] == 6
    assert child.config_snapshot["max_tool_calls_per_step"] == 2
    assert child.config_snapshot["timeout_seconds"] < lead.timeout_seconds
    [refused] = calls(child)
    assert refused.tool_name == "crm_create_contact"
    assert refused.status == ToolCallStatus.DENIED
    assert refused.error_code == "tool_not_allowed"
    with tenancy.agency_context(lead.agency_id):
        from crm.models import Contact

        assert not Contact.objects.filter(agency_id=lead.agency_id).exists()


def test_the_helper_spends_no_more_than_its_share_of_the_leads_budget(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    lead = lead_agent(make_agent)
    # 1000 output tokens at 150 USD per million: each of the helper's calls costs 0.15 USD.
    helper = helper_agent(lead, max_tokens=1000, loop_threshold=0)
    with tenancy.agency_context(lead.agency_id):
        Budget.objects.create(agency_id=lead.agency_id, limit_usd=Decimal("1.00"))
        ModelPrice.objects.create(
            agency_id=lead.agency_id,
            provider="openai",
            model=helper.llm_model,
            input_per_mtok=Decimal(0),
            output_per_mtok=Decimal(150),
        )
    fake_llm_server.set_responder(_lead_then_answer(helper.slug), key=lead.llm_model)

    def search(request: RecordedRequest) -> Step:
        turn = request.assistant_turns
        return tool_call_reply("crm_search_contacts", {"query": f"ada {turn}"}, output_tokens=1000)

    fake_llm_server.set_responder(search, key=helper.llm_model)

    run = wait_for(start(lead, "Research Ada as much as you can."))

    [child] = children(run)
    cap = Decimal(child.config_snapshot["delegation"]["max_cost_usd"])
    assert cap == Decimal("0.5")  # half of the agency's 1.00 USD left today
    assert child.status == ExecutionStatus.FAILED
    assert child.stop_reason == StopReason.BUDGET_EXCEEDED
    assert child.cost_usd <= cap
    assert child.cost_usd == Decimal("0.45")  # three calls; a fourth could have passed the cap
    assert child.llm_call_count == 3
    # The lead resumed with the failure as the call's error, and answered.
    assert run.status == ExecutionStatus.COMPLETED, run.error
    assert run.output == "The helper says: delegated_run_failed"
    [call] = calls(run)
    assert call.status == ToolCallStatus.FAILED
    assert call.error_code == "delegated_run_failed"
    with tenancy.agency_context(lead.agency_id):
        response = AgentMessage.objects.get(from_execution=child)
    assert response.message_type == MessageType.ERROR_NOTIFICATION
    assert response.content["stop_reason"] == StopReason.BUDGET_EXCEEDED


def test_cancelling_the_lead_cancels_its_helpers_down_the_chain(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    lead = lead_agent(make_agent)
    helper = helper_agent(lead, delegate_agents=["helper-*"])
    waiter = helper_agent(lead, slug="helper-waiter")
    fake_llm_server.set_responder(_lead_then_answer(helper.slug), key=lead.llm_model)
    fake_llm_server.set_responder(
        by_turn(tool_call_reply("delegate_to_agent", delegate(waiter.slug, "Wait for news."))),
        key=helper.llm_model,
    )
    fake_llm_server.set_responder(
        by_turn(tool_call_reply("wait", {"seconds": 600})), key=waiter.llm_model
    )

    run = start(lead, "Coordinate the research.")
    assert wait_for(run, {"waiting_agent", *_ENDED}).status == ExecutionStatus.WAITING_AGENT
    [child] = children(run)
    assert wait_for(child, {"waiting_agent", *_ENDED}).status == ExecutionStatus.WAITING_AGENT
    [grandchild] = children(child)
    assert wait_for(grandchild, {"waiting_input", *_ENDED}).status == ExecutionStatus.WAITING_INPUT
    assert grandchild.depth == 2

    with tenancy.agency_context(lead.agency_id):
        cancelled = execution_cancel(execution=refresh(run))

    assert cancelled.status == ExecutionStatus.CANCELLED
    child, grandchild = refresh(child), refresh(grandchild)
    assert child.status == ExecutionStatus.CANCELLED
    assert grandchild.status == ExecutionStatus.CANCELLED
    assert "delegated" in child.error
    time.sleep(1.0)  # nothing resumes the lead: its helper's end came while it was ending
    assert refresh(run).status == ExecutionStatus.CANCELLED
    assert len(fake_llm_server.requests_for(lead.llm_model)) == 1
    [lead_call] = calls(run)
    assert lead_call.status == ToolCallStatus.CANCELLED
    with tenancy.agency_context(lead.agency_id):
        answers = AgentMessage.objects.filter(is_request=False, to_execution__in=[run, child])
        assert {m.message_type for m in answers} == {MessageType.ERROR_NOTIFICATION}
        assert answers.count() == 2


def test_the_leads_wait_ends_with_its_deadline(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    lead = lead_agent(make_agent, timeout_seconds=4)
    helper = helper_agent(lead)
    fake_llm_server.set_responder(_lead_then_answer(helper.slug), key=lead.llm_model)
    fake_llm_server.set_responder(
        by_turn(tool_call_reply("wait", {"seconds": 600})), key=helper.llm_model
    )

    run = wait_for(start(lead, "Ask the helper."), timeout=30)

    assert run.status == ExecutionStatus.TIMED_OUT
    assert run.stop_reason == StopReason.TIMEOUT
    assert "deadline" in run.error
    [child] = children(run)
    child = refresh(child)
    assert child.config_snapshot["timeout_seconds"] <= 4
    assert child.status == ExecutionStatus.CANCELLED


def test_deliveries_racing_the_result_resume_the_lead_once(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    from config.celery_app import app

    lead = lead_agent(make_agent)
    helper = helper_agent(lead)
    fake_llm_server.set_responder(_lead_then_answer(helper.slug), key=lead.llm_model)
    fake_llm_server.set_responder(by_turn(Reply(text="Done.", latency=1.0)), key=helper.llm_model)
    run = start(lead, "Ask the helper.")
    assert wait_for(run, {"waiting_agent", *_ENDED}).status == ExecutionStatus.WAITING_AGENT

    def deliver_again() -> None:
        for _ in range(3):
            app.send_task(
                "agents.run_execution", args=[str(run.id)], kwargs={"agency_id": str(run.agency_id)}
            )

    deliver_again()  # while it waits: none may claim it
    [child] = children(run)
    wait_for(child)
    deliver_again()  # as the helper's end resumes it
    run = wait_for(run)

    assert run.status == ExecutionStatus.COMPLETED, run.error
    assert run.output == "The helper says: Done."
    assert len(fake_llm_server.requests_for(lead.llm_model)) == 2
    assert len(fake_llm_server.requests_for(helper.llm_model)) == 1
    [call] = calls(run)
    assert call.status == ToolCallStatus.COMPLETED
    with tenancy.agency_context(lead.agency_id):
        assert run.steps.filter(tool_name="delegate_to_agent").count() == 1
        assert AgentMessage.objects.filter(in_response_to__from_execution=run).count() == 1
        resumed = run.state_transitions.filter(from_state="waiting_agent").values_list(
            "to_state", flat=True
        )
        assert list(resumed) == ["pending"]
