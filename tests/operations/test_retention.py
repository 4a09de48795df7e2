"""Retention: the beat jobs delete exactly what is past each agency's retention and nothing in
flight (a run in progress or waiting keeps its children, its parent and the event that started
it), keep daily usage totals, leave agencies that keep everything alone, work a backlog off in
batches with a progress log, and the settings are edited in the Agency admin."""

from __future__ import annotations

import datetime
import logging
import uuid
from collections.abc import Callable

import pytest
from django.db.models import Model
from django.test import Client
from django.utils import timezone

from agents import retention as agents_retention
from agents.models import (
    Agent,
    AgentMessage,
    DecisionPoint,
    Execution,
    ExecutionStatus,
    ExecutionStep,
    StateTransition,
    TriggerLog,
)
from approvals.models import Approval, Question
from core import retention, tenancy
from core.models import Agency, Event, Role, User
from tests.admin.helpers import change_url
from tests.agents.factories import (
    AgentFactory,
    AgentMessageFactory,
    DecisionPointFactory,
    ExecutionFactory,
    ExecutionStepFactory,
    StateTransitionFactory,
    TriggerLogFactory,
)
from tests.approvals.factories import ApprovalFactory, QuestionFactory
from tests.core.factories import EventFactory
from tests.factories import AgencyFactory, MembershipFactory
from tests.usage.factories import UsageDailyFactory
from tools.models import ToolCall
from usage.models import UsageDaily

pytestmark = pytest.mark.django_db

OLD = 60  # days: past the 30-day retentions below
RECENT = 5
# Every kind of row a retention job may delete, or must not (what a run's deletion cascades to).
MODELS: list[type[Model]] = [
    Execution,
    ExecutionStep,
    ToolCall,
    Approval,
    Question,
    StateTransition,
    DecisionPoint,
    AgentMessage,
    TriggerLog,
    Event,
    UsageDaily,
    Agent,
]


def ago(days: float) -> datetime.datetime:
    return timezone.now() - datetime.timedelta(days=days)


def backdate(model: type[Model], pk: uuid.UUID, days: float, **also: datetime.datetime) -> None:
    """``created_at`` is auto_now_add: only an UPDATE sets it in the past."""
    with tenancy.platform_context():
        model._default_manager.filter(pk=pk).update(created_at=ago(days), **also)


def counts(agency_id: uuid.UUID) -> dict[str, int]:
    with tenancy.platform_context():
        return {
            model.__name__: model._default_manager.filter(agency_id=agency_id).count()
            for model in MODELS
        }


def run(agent: Agent, status: str, days: float, **fields: object) -> Execution:
    """A run with the children a real one has: two steps, a tool call waiting for an approval,
    a question with its ``ask_user`` call, a state transition, a decision and a message."""
    execution = ExecutionFactory.create(agent=agent, status=status, **fields)
    steps = ExecutionStepFactory.create_batch(2, execution=execution)
    ApprovalFactory.create(tool_call__execution=execution, tool_call__step=steps[0])
    QuestionFactory.create(tool_call__execution=execution)
    StateTransitionFactory.create(execution=execution)
    DecisionPointFactory.create(execution=execution, step=steps[1])
    AgentMessageFactory.create(from_execution=execution)
    backdate(Execution, execution.pk, days)
    return execution


def event(agency: Agency, days: float, *, processed: bool) -> Event:
    row = EventFactory.create(agency=agency)
    backdate(Event, row.pk, days, **({"processed_at": ago(days)} if processed else {}))
    return row


def trigger_log(agent: Agent, days: float, **fields: object) -> TriggerLog:
    row = TriggerLogFactory.create(agent=agent, **fields)
    backdate(TriggerLog, row.pk, days, triggered_at=ago(days))
    return row


def populate(agency: Agency) -> dict[str, Execution]:
    """The same rows in every agency; returns its runs that are in flight or linked to one."""
    agent = AgentFactory.create(agency=agency)
    for processed_days in (OLD, OLD, RECENT):
        event(agency, processed_days, processed=True)
    event(agency, OLD, processed=False)  # not dispatched yet: still has agents to start
    started_by = event(agency, OLD, processed=True)  # but it started a run still in progress

    run(agent, ExecutionStatus.COMPLETED, OLD)
    run(agent, ExecutionStatus.FAILED, OLD)
    run(agent, ExecutionStatus.COMPLETED, RECENT)
    running = run(agent, ExecutionStatus.RUNNING, OLD, trigger_event=started_by)
    waiting = run(agent, ExecutionStatus.WAITING_APPROVAL, OLD)
    parent = run(agent, ExecutionStatus.COMPLETED, OLD)
    child = run(agent, ExecutionStatus.WAITING_INPUT, OLD, parent=parent)

    trigger_log(agent, 10, execution=running)
    trigger_log(agent, 10)
    trigger_log(agent, 1)
    with tenancy.platform_context():
        UsageDaily.objects.filter(
            pk=UsageDailyFactory.create(agent=agent, date=ago(OLD).date()).pk
        ).update(created_at=ago(OLD))
    return {"running": running, "waiting": waiting, "parent": parent, "child": child}


def snapshot(runs: dict[str, Execution]) -> dict[str, tuple[object, ...]]:
    with tenancy.platform_context():
        return {
            name: tuple(
                Execution.objects.filter(pk=execution.pk).values_list(
                    "status", "updated_at", "parent_id", "trigger_event_id"
                )
            )
            for name, execution in runs.items()
        }


def purge() -> None:
    """What beat runs: each app's job, called as the worker calls it."""
    agents_retention.purge_past_retention()
    agents_retention.purge_events_past_retention()


def test_retention_deletes_exactly_what_is_past_it_and_nothing_in_flight() -> None:
    limited = AgencyFactory.create(
        execution_retention_days=30, event_retention_days=30, trigger_log_retention_days=7
    )
    forever = AgencyFactory.create(
        execution_retention_days=None, event_retention_days=None, trigger_log_retention_days=None
    )
    in_flight = populate(limited)
    populate(forever)
    per_run = {
        "Execution": 1,
        "ExecutionStep": 2,
        "ToolCall": 2,
        "Approval": 1,
        "Question": 1,
        "StateTransition": 1,
        "DecisionPoint": 1,
        "AgentMessage": 1,
    }
    runs = 7
    before = {
        **{name: n * runs for name, n in per_run.items()},
        "TriggerLog": 3,
        "Event": 5,
        "UsageDaily": 1,
        "Agent": 1 + runs,  # each run's message went to an agent of its own
    }
    assert counts(limited.id) == before
    assert counts(forever.id) == before
    untouched = snapshot(in_flight)

    purge()

    # Gone: the old completed and failed runs with all their children, the two old trigger
    # logs, the two old processed events nothing in flight points at.
    deleted = {name: n * 2 for name, n in per_run.items()} | {"TriggerLog": 2, "Event": 2}
    assert counts(limited.id) == {name: n - deleted.get(name, 0) for name, n in before.items()}
    # The runs in flight, the finished parent of one and the event that started another are
    # all there, not even updated (no parent or trigger event cleared).
    assert snapshot(in_flight) == untouched
    assert counts(forever.id) == before
    # A second pass finds nothing more.
    purge()
    assert counts(limited.id)["Execution"] == runs - 2


def test_a_backlog_larger_than_a_batch_is_deleted_in_batches_with_a_progress_log(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(retention, "BATCH", 3)
    monkeypatch.setattr(retention, "PROGRESS_EVERY", 2)
    agency = AgencyFactory.create(execution_retention_days=30)
    agent = AgentFactory.create(agency=agency)
    old = ExecutionFactory.create_batch(10, agent=agent, status=ExecutionStatus.COMPLETED)
    for execution in old:
        ExecutionStepFactory.create(execution=execution)
        backdate(Execution, execution.pk, OLD)
    ExecutionFactory.create(agent=agent, status=ExecutionStatus.COMPLETED)  # recent: kept

    with caplog.at_level(logging.INFO, logger="core.retention"):
        agents_retention.purge_past_retention()

    assert counts(agency.id)["Execution"] == 1
    assert counts(agency.id)["ExecutionStep"] == 0
    label = f"agency {agency.id} executions"
    assert f"retention: {label}: 6 deleted so far (batch 2)" in caplog.messages
    assert f"retention: {label}: 10 deleted, with {{'agents.ExecutionStep': 10}}" in (
        caplog.messages
    )


def test_a_backlog_past_the_batches_of_one_job_is_finished_by_the_next(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(retention, "BATCH", 2)
    monkeypatch.setattr(retention, "MAX_BATCHES", 2)
    agency = AgencyFactory.create(event_retention_days=1)
    for _ in range(7):
        event(agency, OLD, processed=True)

    with caplog.at_level(logging.INFO, logger="core.retention"):
        assert agents_retention.purge_events_past_retention() >= 4
    assert counts(agency.id)["Event"] == 3
    assert any("left for the next job" in message for message in caplog.messages)

    agents_retention.purge_events_past_retention()
    agents_retention.purge_events_past_retention()
    assert counts(agency.id)["Event"] == 0


def test_one_agency_failing_does_not_stop_the_others(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    first, second = (AgencyFactory.create(event_retention_days=1) for _ in range(2))
    for agency in (first, second):
        event(agency, OLD, processed=True)
    real = retention.purge_agency

    def failing_for_first(*, agency_id: uuid.UUID, **kwargs: object) -> dict[str, int]:
        if agency_id == first.id:
            raise RuntimeError("boom")
        return real(agency_id=agency_id, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(retention, "purge_agency", failing_for_first)
    with caplog.at_level(logging.INFO, logger="core.retention"):
        agents_retention.purge_events_past_retention()

    assert counts(first.id)["Event"] == 1
    assert counts(second.id)["Event"] == 0
    assert f"retention: agency {first.id}: purge failed" in caplog.messages


def test_a_new_agency_keeps_runs_and_events_90_days_and_trigger_logs_30() -> None:
    agency = AgencyFactory.create()
    assert (
        agency.execution_retention_days,
        agency.event_retention_days,
        agency.trigger_log_retention_days,
    ) == (90, 90, 30)


def agency_admin(agency: Agency) -> User:
    return MembershipFactory.create(agency=agency, role=Role.ADMIN).user


def superuser(agency: Agency) -> User:
    return User.objects.create_superuser("root", "root@example.com", "pw")


def staff(agency: Agency) -> User:
    return MembershipFactory.create(agency=agency, role=Role.STAFF).user


@pytest.mark.parametrize(
    ("login", "can_edit"), [(agency_admin, True), (superuser, True), (staff, False)]
)
def test_the_retention_settings_are_edited_in_the_agency_admin(
    login: Callable[[Agency], User], can_edit: bool
) -> None:
    agency = AgencyFactory.create(name="Acme", slug="acme")
    client = Client()
    client.force_login(login(agency))

    page = client.get(change_url(agency))
    assert page.status_code == 200
    assert b"Retention" in page.content
    form = page.context["adminform"].form
    editable = {"execution_retention_days", "event_retention_days", "trigger_log_retention_days"}
    assert (editable <= set(form.fields)) is can_edit

    data = {
        "name": "Acme",
        "slug": "acme",
        "is_active": "on",
        "enabled_modules": "booking,crm,email",
        "execution_retention_days": "14",
        "event_retention_days": "",  # keep forever
        "trigger_log_retention_days": "3",
        "embedding_provider": "local",
        "embedding_model": "",
    }
    response = client.post(change_url(agency), data)

    with tenancy.platform_context():
        agency.refresh_from_db()
    saved = (
        agency.execution_retention_days,
        agency.event_retention_days,
        agency.trigger_log_retention_days,
    )
    if can_edit:
        assert response.status_code == 302, response.context["adminform"].form.errors
        assert saved == (14, None, 3)
    else:
        assert response.status_code == 403
        assert saved == (90, 90, 30)
