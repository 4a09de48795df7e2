"""wait parks the execution; trigger_workflow emits an event that subscribed agents start on."""

from __future__ import annotations

import datetime

import pytest
from django.utils import timezone

from agents.models import Execution, TriggerLog
from agents.services.dispatch import event_dispatch
from core import tenancy
from core.models import ActorType, Event
from tests.agents.factories import AgentFactory
from tests.tools.builtin.conftest import call, call_error, call_raw
from tools.handlers import ToolContext, ToolResult
from tools.models import Tool


def test_wait_parks_the_execution_until_a_time_in_the_future(ctx: ToolContext) -> None:
    before = timezone.now()

    result = call_raw(ctx, "wait", {"seconds": 90})

    assert isinstance(result, ToolResult)
    assert result.park_until is not None
    assert result.park_until.tzinfo is not None
    assert before + datetime.timedelta(seconds=90) <= result.park_until
    assert result.park_until <= timezone.now() + datetime.timedelta(seconds=90)
    assert result.output["waiting_until"] == result.park_until.isoformat()


@pytest.mark.parametrize("seconds", [0, -5, 8 * 24 * 3600, "60", True])
def test_wait_refuses_non_positive_and_unbounded_waits(ctx: ToolContext, seconds: object) -> None:
    error = call_error(ctx, "wait", {"seconds": seconds}, validate=False)

    assert error.code == "invalid_argument"


def test_trigger_workflow_emits_the_event_as_the_agent(ctx: ToolContext) -> None:
    output = call(
        ctx,
        "trigger_workflow",
        {
            "workflow_id": "ai.workflow.sales.lead_qualified",
            "input_data": {"contact_id": "c-1", "score": 9},
        },
    )

    with tenancy.agency_context(ctx.agency_id):
        event = Event.objects.get(id=output["event_id"])
    assert event.event_type == output["event_type"] == "ai.workflow.sales.lead_qualified"
    assert event.payload["input_data"] == {"contact_id": "c-1", "score": 9}
    assert event.payload["execution_id"] == str(ctx.execution_id)
    assert (event.actor_type, event.actor_id) == (ActorType.AGENT, str(ctx.agent_id))


def test_trigger_workflow_bare_name_is_an_ai_workflow_event(ctx: ToolContext) -> None:
    output = call(ctx, "trigger_workflow", {"workflow_id": "lead_followup"})

    assert output["event_type"] == "ai.workflow.lead_followup"


def test_trigger_workflow_replayed_call_returns_the_same_event(ctx: ToolContext) -> None:
    first = call(ctx, "trigger_workflow", {"workflow_id": "ai.workflow.nightly"})
    again = call(ctx, "trigger_workflow", {"workflow_id": "ai.workflow.nightly"})

    assert again["event_id"] == first["event_id"]
    with tenancy.agency_context(ctx.agency_id):
        assert Event.objects.filter(event_type="ai.workflow.nightly").count() == 1


@pytest.mark.parametrize(
    ("workflow_id", "code"),
    [
        # Domain events: subscribed agents would start on a payload the model made up.
        ("crm.contact.created", "reserved_event_type"),
        ("form.submitted", "reserved_event_type"),
        ("sales.lead.qualified", "reserved_event_type"),
        ("ai.execution.completed", "reserved_event_type"),
        ("ai.approval.resolved", "reserved_event_type"),
        ("ai.workflow", "reserved_event_type"),
        ("ai.workflow.", "invalid_argument"),
        ("ai.workflow.Bad", "invalid_argument"),
        ("Sales.Lead", "invalid_argument"),
        ("has space", "invalid_argument"),
        ("trailing.", "invalid_argument"),
    ],
)
def test_trigger_workflow_refuses_anything_but_a_workflow_event(
    ctx: ToolContext, workflow_id: str, code: str
) -> None:
    error = call_error(ctx, "trigger_workflow", {"workflow_id": workflow_id})

    assert error.code == code
    assert "ai.workflow.<name>" in error.message  # names the form that is allowed
    with tenancy.agency_context(ctx.agency_id):
        assert not Event.objects.filter(agency_id=ctx.agency_id).exists()


def test_trigger_workflow_starts_the_agents_subscribed_to_the_workflow(
    ctx: ToolContext, execution: Execution
) -> None:
    follower = AgentFactory.create(
        agency=execution.agency,
        site=execution.site,
        trigger_events=["ai.workflow.lead_followup"],
    )
    bystander = AgentFactory.create(
        agency=execution.agency, site=execution.site, trigger_events=["crm.contact.created"]
    )
    with tenancy.agency_context(ctx.agency_id):  # the triggering agent follows it too
        execution.agent.trigger_events = ["ai.workflow.lead_followup"]
        execution.agent.save(update_fields=["trigger_events"])

    output = call(ctx, "trigger_workflow", {"workflow_id": "lead_followup"})
    with tenancy.agency_context(ctx.agency_id):
        started = event_dispatch(event=Event.objects.get(id=output["event_id"]))
        logged = dict(TriggerLog.objects.values_list("agent_id", "outcome"))

    # Not the agent that triggered it (its own ai.* events never re-start it: a logged skip),
    # nor the bystander (not subscribed: nothing to log).
    assert [run.agent_id for run in started] == [follower.id]
    assert started[0].trigger_data["payload"]["execution_id"] == str(ctx.execution_id)
    assert logged == {follower.id: "invoked", execution.agent_id: "skipped"}
    assert bystander.id not in logged


@pytest.mark.django_db
def test_the_model_is_told_which_events_trigger_workflow_emits() -> None:
    with tenancy.platform_context():
        tool = Tool.objects.get(name="trigger_workflow", agency__isnull=True)
    assert "ai.workflow.<workflow_id>" in tool.description
    assert "lead_followup" in tool.parameters_schema["properties"]["workflow_id"]["description"]


def test_wait_accepts_a_whole_number_float_as_the_schema_does(ctx: ToolContext) -> None:
    result = call_raw(ctx, "wait", {"seconds": 5.0})
    error = call_error(ctx, "wait", {"seconds": 5.5}, validate=False)

    assert isinstance(result, ToolResult)
    assert result.output["seconds"] == 5
    assert isinstance(result.output["seconds"], int)
    assert error.code == "invalid_argument"
