"""When an agent starts: its trigger conditions against the event's payload, the self-trigger
guard, the agency and site switches, and what the agent services refuse to store (conditions of
the wrong shape, event types that could never fire, cron expressions Celery cannot parse)."""

from __future__ import annotations

from typing import Any

import pytest

from agents import lifecycle
from agents.models import Agent, Execution, ExecutionStatus, StopReason, TriggerLog
from agents.services import agent_create, agent_update, event_dispatch, execution_create
from agents.triggers import InvalidConditions, unmet_condition, validate_conditions
from core import tenancy
from core.events import emitted_by_run, event_emit
from core.exceptions import ApplicationError
from core.models import Agency, Event, Site
from tests.agents.factories import AgentFactory, ExecutionFactory

pytestmark = pytest.mark.django_db

EVENT = "crm.contact.created"


# --- the condition format ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("conditions", "payload"),
    [
        ({}, {}),
        ({"source": "web"}, {"source": "web", "other": 1}),
        ({"contact.country": "DE"}, {"contact": {"country": "DE"}}),
        ({"contact.country": ["AT", "DE"]}, {"contact": {"country": "DE"}}),
        ({"score": 70, "vip": True, "note": None}, {"score": 70.0, "vip": True, "note": None}),
    ],
)
def test_a_payload_meeting_every_condition_passes(conditions: Any, payload: Any) -> None:
    validate_conditions(conditions)
    assert unmet_condition(conditions, payload) is None


@pytest.mark.parametrize(
    ("conditions", "payload", "why"),
    [
        ({"source": "web"}, {"source": "email"}, "'source' is 'email', the condition wants 'web'"),
        ({"source": "web"}, {}, "the payload has no 'source'"),
        ({"contact.country": ["AT", "DE"]}, {"contact": {"country": "FR"}}, "one of 'AT', 'DE'"),
        ({"contact.country": "DE"}, {"contact": "DE"}, "the payload has no 'contact.country'"),
        ({"source": "web", "vip": True}, {"source": "web", "vip": False}, "'vip' is false"),
        ({"vip": 1}, {"vip": True}, "'vip' is true"),  # JSON's true is not 1
    ],
)
def test_a_payload_missing_one_condition_says_which(
    conditions: Any, payload: Any, why: str
) -> None:
    validate_conditions(conditions)
    unmet = unmet_condition(conditions, payload)
    assert unmet is not None
    assert why in unmet


@pytest.mark.parametrize(
    ("conditions", "message"),
    [
        (["source", "web"], "Must be a JSON object"),
        ("source=web", "Must be a JSON object"),
        ({"": "web"}, "is not a payload key"),
        ({"contact..country": "DE"}, "is not a payload key"),
        ({".source": "web"}, "is not a payload key"),
        ({"contact": {"country": "DE"}}, "use a dotted key"),
        ({"source": []}, "an empty list of choices never matches"),
        ({"source": ["web", {"a": 1}]}, "a list of choices holds"),
        ({f"k{n}": n for n in range(51)}, "At most 50 conditions"),
    ],
)
def test_conditions_of_the_wrong_shape_are_refused_with_a_reason(
    conditions: Any, message: str
) -> None:
    with pytest.raises(InvalidConditions) as error:
        validate_conditions(conditions)
    assert any(message in m for m in error.value.messages), error.value.messages


# --- event dispatch ------------------------------------------------------------------------


def _event(agent: Agent, payload: dict[str, Any], **fields: Any) -> Event:
    with tenancy.agency_context(agent.agency_id):
        return event_emit(
            agency_id=agent.agency_id,
            event_type=fields.pop("event_type", EVENT),
            payload=payload,
            **fields,  # its dispatch is sent on commit: never, in a test's transaction
        )


def _dispatch(event: Event) -> list[Execution]:
    with tenancy.agency_context(event.agency_id):
        return event_dispatch(event=event)


def _logs(agent: Agent) -> list[tuple[str, str, str]]:
    with tenancy.agency_context(agent.agency_id):
        return list(
            TriggerLog.objects.filter(agent=agent)
            .order_by("triggered_at")
            .values_list("outcome", "skip_reason", "skip_detail")
        )


def test_an_event_whose_payload_misses_the_conditions_starts_nothing_and_logs_why() -> None:
    agent = AgentFactory.create(trigger_events=[EVENT], trigger_conditions={"source": "web"})
    assert _dispatch(_event(agent, {"source": "email"})) == []
    assert _logs(agent) == [
        ("skipped", "conditions_not_met", "'source' is 'email', the condition wants 'web'")
    ]
    started = _dispatch(_event(agent, {"source": "web", "name": "Ada"}))
    assert [e.agent_id for e in started] == [agent.id]
    assert [outcome for outcome, _, _ in _logs(agent)] == ["skipped", "invoked"]


def test_nested_and_one_of_conditions_pick_the_events_they_name() -> None:
    agent = AgentFactory.create(
        trigger_events=[EVENT], trigger_conditions={"contact.country": ["AT", "DE"]}
    )
    other = AgentFactory.create(agency=agent.agency, site=agent.site, trigger_events=[EVENT])
    started = _dispatch(_event(agent, {"contact": {"country": "FR"}}))
    assert [e.agent_id for e in started] == [other.id]  # no conditions: every event
    started = _dispatch(_event(agent, {"contact": {"country": "AT"}}))
    assert sorted(str(e.agent_id) for e in started) == sorted([str(agent.id), str(other.id)])


def test_a_wildcard_subscription_takes_every_type_under_its_prefix() -> None:
    # Seed 004's guardian subscribes to "event:auth.login.*".
    guardian = AgentFactory.create(trigger_events=["auth.login.*"])
    broad = AgentFactory.create(
        agency=guardian.agency, site=guardian.site, trigger_events=["auth.*"]
    )

    def started_for(event_type: str) -> set[Any]:
        event = _event(guardian, {}, event_type=event_type)
        assert event.processed_at is None  # it has subscribers: left for the dispatch
        return {run.agent_id for run in _dispatch(event)}

    assert started_for("auth.login.failed") == {guardian.id, broad.id}
    assert started_for("auth.logout.done") == {broad.id}
    with tenancy.agency_context(guardian.agency_id):
        lone = event_emit(agency_id=guardian.agency_id, event_type="authx.login.failed")
    assert lone.processed_at is not None  # no subscription matches: nothing to dispatch


def test_conditions_stored_before_they_were_checked_are_logged_as_an_error() -> None:
    agent = AgentFactory.create(trigger_events=[EVENT], trigger_conditions={"source": {"a": 1}})
    assert _dispatch(_event(agent, {"source": {"a": 1}})) == []
    [(outcome, reason, detail)] = _logs(agent)
    assert (outcome, reason) == ("skipped", "error")
    assert "trigger_conditions are invalid" in detail


def test_an_agents_own_ai_event_is_logged_as_skipped_not_ignored() -> None:
    agent = AgentFactory.create(trigger_events=["ai.execution.completed"])
    own = _event(
        agent, {"agent_id": str(agent.id)}, event_type="ai.execution.completed", actor_id=agent.id
    )
    assert _dispatch(own) == []
    [(outcome, reason, detail)] = _logs(agent)
    assert (outcome, reason) == ("skipped", "conditions_not_met")
    assert "own ai.* event" in detail
    # Another agent's completion does start it.
    theirs = _event(
        agent, {}, event_type="ai.execution.completed", actor_id=AgentFactory.create().id
    )
    assert [e.agent_id for e in _dispatch(theirs)] == [agent.id]


def test_a_run_started_by_another_runs_event_is_its_child_and_chains_stop_at_the_limit(
    settings: Any,
) -> None:
    """Agents that start each other through events (A's event starts B, B's starts A) would run
    and spend without end: a run started by a run's event is one deeper, and the events of a run
    at AGENTDESK_MAX_RUN_CHAIN_DEPTH start no agent."""
    settings.AGENTDESK_MAX_RUN_CHAIN_DEPTH = 2
    agent = AgentFactory.create(trigger_events=["ai.workflow.ping"])
    with tenancy.agency_context(agent.agency_id):
        root = execution_create(agent=agent, input="start")  # by a person: depth 0
    assert root is not None
    assert (root.parent_id, root.depth) == (None, 0)

    parent = root
    for depth in (1, 2):
        with tenancy.agency_context(agent.agency_id), emitted_by_run(parent.id, parent.depth):
            event = event_emit(agency_id=agent.agency_id, event_type="ai.workflow.ping")
        assert (event.source_execution_id, event.chain_depth) == (parent.id, depth)
        [child] = _dispatch(event)
        assert (child.parent_id, child.depth) == (parent.id, depth)
        parent = child

    with tenancy.agency_context(agent.agency_id), emitted_by_run(parent.id, parent.depth):
        too_deep = event_emit(agency_id=agent.agency_id, event_type="ai.workflow.ping")
    assert _dispatch(too_deep) == []
    outcome, reason, detail = _logs(agent)[-1]
    assert (outcome, reason) == ("skipped", "chain_too_deep")
    assert "AGENTDESK_MAX_RUN_CHAIN_DEPTH is 2" in detail
    # Events of people and systems start chains afresh.
    with tenancy.agency_context(agent.agency_id):
        fresh = event_emit(agency_id=agent.agency_id, event_type="ai.workflow.ping")
    [run] = _dispatch(fresh)
    assert (run.parent_id, run.depth) == (None, 0)


def test_a_run_started_by_the_event_of_a_run_deleted_since_has_no_parent() -> None:
    """The source run went with its agent: its event still starts its subscribers (the parent's
    foreign key would otherwise fail the whole dispatch at commit, for good)."""
    agent = AgentFactory.create(trigger_events=["ai.workflow.ping"])
    source = ExecutionFactory.create(
        agent=AgentFactory.create(agency=agent.agency, site=agent.site), depth=1
    )
    with tenancy.agency_context(agent.agency_id), emitted_by_run(source.id, source.depth):
        event = event_emit(agency_id=agent.agency_id, event_type="ai.workflow.ping")
    with tenancy.agency_context(agent.agency_id):
        source.agent.delete()  # its runs with it
    [run] = _dispatch(event)
    assert (run.parent_id, run.depth) == (None, 2)


def test_an_evaluation_runs_events_are_recorded_and_start_no_agent() -> None:
    """An experiment's run replays recorded tool replies: a subscriber started by its end event
    (or any event of its tools) would act for real on a rehearsal. Its events are recorded,
    processed, and start nobody; a real run's end event starts the subscriber."""
    listener = AgentFactory.create(trigger_events=["ai.execution.completed"])
    evaluated = AgentFactory.create(agency=listener.agency, site=listener.site)

    def ended(purpose: str) -> Event:
        with tenancy.agency_context(listener.agency_id):
            execution = ExecutionFactory.create(
                agent=evaluated, status=ExecutionStatus.RUNNING, purpose=purpose
            )
            lifecycle.finish_execution(
                execution, status=ExecutionStatus.COMPLETED, stop_reason=StopReason.FINAL_ANSWER
            )
            execution.save()
            return Event.objects.get(
                source_entity_id=str(execution.id), event_type="ai.execution.completed"
            )

    rehearsal = ended("evaluation")
    assert rehearsal.processed_at is not None
    assert _dispatch(rehearsal) == []
    real = ended("run")
    assert real.processed_at is None
    [started] = _dispatch(real)
    assert started.agent_id == listener.id


# --- agency and site switches --------------------------------------------------------------


@pytest.mark.parametrize(
    ("switch", "detail"),
    [("agency", "the agency is suspended"), ("site", "the agent's site is not active")],
)
def test_a_suspended_agency_or_inactive_site_starts_no_run(switch: str, detail: str) -> None:
    agent = AgentFactory.create(trigger_events=[EVENT])
    with tenancy.platform_context():
        if switch == "agency":
            Agency.objects.filter(pk=agent.agency_id).update(is_active=False)
        else:
            Site.objects.filter(pk=agent.site_id).update(is_active=False)
    with tenancy.agency_context(agent.agency_id):
        assert execution_create(agent=agent, input="Go.") is None
        assert not Execution.objects.filter(agent=agent).exists()
    assert _dispatch(_event(agent, {})) == []
    logs = _logs(agent)
    assert [(o, r) for o, r, _ in logs] == [("skipped", "agent_inactive")] * 2
    assert all(detail in d for _, _, d in logs)


# --- what the services refuse to store -----------------------------------------------------


def _fields(**extra: Any) -> dict[str, Any]:
    return {"name": "A", "agent_type": "assistant", "system_prompt": "x", **extra}


@pytest.mark.parametrize(
    ("extra", "field", "message"),
    [
        ({"trigger_conditions": {"source": {"a": 1}}}, "trigger_conditions", "dotted key"),
        ({"trigger_conditions": ["source"]}, "trigger_conditions", "Must be a JSON object"),
        ({"trigger_events": ["CRM Contact Created"]}, "trigger_events", "is not an event type"),
        ({"trigger_events": ["auth.*.failed"]}, "trigger_events", "may only end a subscription"),
        ({"trigger_schedule": "1,,2 * * * *"}, "trigger_schedule", "Invalid cron expression"),
    ],
)
def test_the_services_refuse_triggers_that_could_never_fire(
    extra: dict[str, Any], field: str, message: str
) -> None:
    site = AgentFactory.create().site
    with tenancy.agency_context(site.agency_id):
        with pytest.raises(ApplicationError) as error:
            agent_create(agency_id=site.agency_id, site=site, **_fields(**extra))
        assert any(message in m for m in error.value.extra["fields"][field])
        agent = agent_create(agency_id=site.agency_id, site=site, **_fields())
        with pytest.raises(ApplicationError) as error:
            agent_update(agent=agent, **extra)
        assert field in error.value.extra["fields"]
        assert Agent.objects.filter(site=site).count() == 2  # the factory's and the valid one


def test_valid_triggers_are_stored() -> None:
    site = AgentFactory.create().site
    conditions = {"source": "web", "contact.country": ["AT", "DE"]}
    with tenancy.agency_context(site.agency_id):
        agent = agent_create(
            agency_id=site.agency_id,
            site=site,
            **_fields(trigger_events=[EVENT, "form.submitted"], trigger_conditions=conditions),
        )
    assert agent.trigger_conditions == conditions
