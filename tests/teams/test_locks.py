"""A delegated run's end and its parent's: the child's end takes no lock on the parent (its
enders often hold the child's row already, and the parent's cancel locks parent then child), the
parent's resume is a task that locks the parent alone and resumes it exactly once, and a parent
that parks after its child ended is still resumed. Real transactions; the Celery sends are
recorded instead of sent."""

from __future__ import annotations

import datetime
import threading
import time
import uuid
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents.models import (
    AgentMessage,
    Execution,
    ExecutionStatus,
    MessageType,
    StopReason,
    TriggerType,
)
from agents.runtime import store
from agents.services import execution_cancel
from approvals.services import approval_decide
from core import tenancy
from teams import runtime as teams_runtime
from teams.services import delegate, ending
from tests.agents.factories import AgentFactory, ExecutionFactory
from tests.approvals.factories import ApprovalFactory
from tests.tools.factories import ToolCallFactory
from tools.handlers import AwaitRun, ToolError
from tools.models import ToolCallStatus
from usage.pricing import Price

QUEUE = "team-queue"
Sent = list[tuple[str, list[Any], dict[str, Any]]]


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Sent:
    """What would have gone to the broker: (task name, args, options)."""
    from config.celery_app import app

    calls: Sent = []

    def send_task(name: str, args: Any = None, kwargs: Any = None, **options: Any) -> None:
        calls.append((name, list(args or []), options))

    monkeypatch.setattr(app, "send_task", send_task)
    return calls


def _team(
    *, child_status: str, parent_status: str = ExecutionStatus.WAITING_AGENT, **fields: Any
) -> tuple[Execution, Execution]:
    """A parent run (``fields``) waiting for the run it delegated to (``child_status``)."""
    lead = AgentFactory.create()
    helper = AgentFactory.create(agency=lead.agency, site=lead.site, slug="helper")
    child_id = uuid.uuid4()
    parent_run = ExecutionFactory.create(
        agent=lead,
        status=parent_status,
        input_request={"kind": "agent", "agent": "helper", "execution_id": str(child_id)},
        **fields,
    )
    child = ExecutionFactory.create(
        id=child_id,
        agent=helper,
        parent=parent_run,
        depth=1,
        trigger_type=TriggerType.AGENT,
        status=child_status,
        started_at=timezone.now(),
        initial_context={"delegation": {"queue": QUEUE, "parent_agent_id": str(lead.id)}},
    )
    return parent_run, child


def _resumes(sent: Sent) -> list[tuple[list[Any], Any]]:
    return [
        (args, options.get("queue"))
        for name, args, options in sent
        if name == "teams.resume_parent"
    ]


def _waiting_for_a_lock_of_this_session() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks"
            " WHERE NOT granted AND pg_backend_pid() = ANY(pg_blocking_pids(pid))"
        )
        return int(cursor.fetchone()[0])


def test_a_delegated_run_denied_while_its_parent_is_cancelled_neither_deadlocks(
    live_db: None, sent: Sent
) -> None:
    parent, child = _team(child_status=ExecutionStatus.WAITING_APPROVAL)
    call = ToolCallFactory.create(execution=child, status=ToolCallStatus.WAITING_APPROVAL)
    approval = ApprovalFactory.create(tool_call=call)
    decided: dict[str, Any] = {}

    def deny() -> None:  # locks the child's row, then ends it: its end must not wait for the parent
        try:
            with tenancy.agency_context(child.agency_id):
                approval_decide(approval=approval, approve=False, user_id=None, reason="No.")
            decided["outcome"] = "denied"
        except Exception as exc:
            decided["outcome"] = exc
        finally:
            connections.close_all()

    approver = threading.Thread(target=deny)
    with tenancy.agency_context(parent.agency_id):
        # The parent's cancel holds the parent's row (its first step) while the child is denied.
        Execution.objects.select_for_update().get(pk=parent.pk)
        approver.start()
        deadline = time.monotonic() + 10
        while approver.is_alive() and not _waiting_for_a_lock_of_this_session():
            assert time.monotonic() < deadline, "the deny neither ended nor waited"
            time.sleep(0.02)
        execution_cancel(execution=Execution.objects.get(pk=parent.pk))  # then locks the child
    approver.join(10)

    assert not approver.is_alive()
    assert decided["outcome"] == "denied"  # not a deadlock error
    with tenancy.agency_context(parent.agency_id):
        assert Execution.objects.get(pk=parent.pk).status == ExecutionStatus.CANCELLED
        ended = Execution.objects.get(pk=child.pk)
    assert ended.status == ExecutionStatus.CANCELLED
    assert _resumes(sent) == [([str(child.id)], QUEUE)]  # on the parent's queue
    # The task records the answer; the parent has ended, so nothing resumes.
    with tenancy.agency_context(parent.agency_id):
        assert ending.parent_resume(child=ended) is False
        [answer] = AgentMessage.objects.filter(from_execution=child, is_request=False)
    assert answer.to_execution_id == parent.id
    assert answer.message_type == MessageType.ERROR_NOTIFICATION


def test_the_parent_is_resumed_once_however_often_the_task_runs(live_db: None, sent: Sent) -> None:
    parent, child = _team(child_status=ExecutionStatus.COMPLETED)
    with tenancy.agency_context(parent.agency_id):
        child = Execution.objects.select_related("agent").get(pk=child.pk)
        outcomes = [ending.parent_resume(child=child) for _ in range(3)]
        resumed = Execution.objects.get(pk=parent.pk)
        answers = AgentMessage.objects.filter(from_execution=child, is_request=False)
        assert answers.count() == 1
        assert answers[0].message_type == MessageType.RESULT
    assert outcomes == [True, False, False]
    assert resumed.status == ExecutionStatus.PENDING
    assert [(n, o.get("queue")) for n, _, o in sent if n != "teams.resume_parent"] == [
        ("agents.run_execution", QUEUE)
    ]


def test_a_parent_waiting_for_another_run_is_not_resumed(live_db: None, sent: Sent) -> None:
    parent, child = _team(child_status=ExecutionStatus.COMPLETED)
    with tenancy.agency_context(parent.agency_id):
        Execution.objects.filter(pk=parent.pk).update(
            input_request={"kind": "agent", "execution_id": str(uuid.uuid4())}
        )
        assert ending.parent_resume(child=child) is False
        assert Execution.objects.get(pk=parent.pk).status == ExecutionStatus.WAITING_AGENT


@pytest.mark.parametrize(
    ("child_status", "resumed"),
    [(ExecutionStatus.COMPLETED, True), (ExecutionStatus.RUNNING, False)],
)
def test_a_parent_that_parks_after_its_child_ended_is_still_resumed(
    live_db: None, sent: Sent, child_status: str, resumed: bool
) -> None:
    # The parent runs (a delivery that came early) while its child ends; the child's resume
    # found it running. Its park must see the child ended.
    parent, child = _team(
        child_status=child_status,
        parent_status=ExecutionStatus.RUNNING,
        lease_owner="worker-1",
        lease_expires_at=timezone.now() + datetime.timedelta(minutes=5),
    )
    until = timezone.now() + datetime.timedelta(hours=2)
    awaiting = AwaitRun(
        execution_id=child.id,
        until=until,
        input_request={"kind": "agent", "agent": "helper", "execution_id": str(child.id)},
    )
    parent = _fresh(parent)
    with store.step_transaction(parent, "worker-1") as tx:
        teams_runtime.park(tx, "delegate_to_agent", awaiting)

    assert _resumes(sent) == ([([str(child.id)], QUEUE)] if resumed else [])
    with tenancy.agency_context(parent.agency_id):
        assert Execution.objects.get(pk=parent.pk).status == ExecutionStatus.WAITING_AGENT
        if resumed:  # the task, once the park committed
            assert ending.parent_resume(child=_fresh(child)) is True
            assert Execution.objects.get(pk=parent.pk).status == ExecutionStatus.PENDING


def _fresh(execution: Execution) -> Execution:
    with tenancy.agency_context(execution.agency_id):
        return Execution.objects.select_related("agent").get(pk=execution.pk)


def test_the_budget_share_reads_the_delegated_runs_cost_once_per_delivery(live_db: None) -> None:
    run, child = _team(
        child_status=ExecutionStatus.COMPLETED, parent_status=ExecutionStatus.RUNNING
    )
    with tenancy.agency_context(run.agency_id):
        Execution.objects.filter(pk=child.pk).update(cost_usd=Decimal("0.10"))
    run.cost_usd = Decimal("0.30")
    snapshot: Any = {"delegation": {"max_cost_usd": "0.5"}, "max_tokens": 1000}
    price = Price(Decimal(0), Decimal(100), Decimal(0), Decimal(0))  # 0.10 USD per 1000 tokens
    share = teams_runtime.budget_share(snapshot)
    assert share is not None

    assert teams_runtime.over_share(share, run, snapshot, price, 0) is None  # 0.4 + 0.1
    assert share.delegated == Decimal("0.10")
    run.cost_usd = Decimal("0.35")  # the next model call's cost, counted in memory
    with CaptureQueriesContext(connection) as queries:
        refused = teams_runtime.over_share(share, run, snapshot, price, 0)
    assert len(queries) == 0
    assert refused is not None
    assert "0.450000 USD so far" in refused
    assert teams_runtime.budget_share({"max_tokens": 1000}) is None  # type: ignore[typeddict-item]


def test_instruction_and_input_too_long_together_say_so() -> None:
    # 9,900 bytes compact, but one line per item as the run's input shows it
    input_data = {"ids": [0] * 3300}
    with pytest.raises(ToolError) as raised:
        delegate.check_arguments(
            {"agent": "helper", "instruction": "x" * 8000, "input": input_data}
        )
    assert "together" in raised.value.message
    with pytest.raises(ToolError) as raised:
        delegate.check_arguments(
            {"agent": "helper", "instruction": "x", "input": {"a": "y" * 11_000}}
        )
    assert "bytes" in raised.value.message


def test_a_long_result_is_left_out_of_the_parents_context() -> None:
    child = Execution(
        output="z" * (delegate.OUTPUT_MAX_CHARS + 10),
        result={"rows": ["r" * 100] * 300},
        status=ExecutionStatus.COMPLETED,
        stop_reason=StopReason.FINAL_ANSWER,
    )
    answer = delegate.child_answer(child)
    assert len(answer["output"]) == delegate.OUTPUT_MAX_CHARS
    assert answer["result"] == {}
    assert answer["truncated"] == ["output", "result"]
    child.result = {"ok": True}
    child.output = "short"
    assert delegate.child_answer(child) == {"output": "short", "result": {"ok": True}}


def test_the_expiry_sweep_goes_on_past_a_run_that_fails(
    live_db: None, sent: Sent, monkeypatch: pytest.MonkeyPatch
) -> None:
    from teams import tasks

    past = timezone.now() - datetime.timedelta(minutes=5)
    broken, _ = _team(child_status=ExecutionStatus.RUNNING, wait_until=past)
    due, _ = _team(child_status=ExecutionStatus.RUNNING, wait_until=past)
    real = tasks.wait_expire

    def wait_expire(execution: Execution, *, now: datetime.datetime) -> bool:
        if execution.pk == broken.pk:
            raise RuntimeError("boom")
        return real(execution, now=now)

    monkeypatch.setattr(tasks, "wait_expire", wait_expire)
    tasks.expire_waits()

    assert _fresh(broken).status == ExecutionStatus.WAITING_AGENT
    assert _fresh(due).status == ExecutionStatus.TIMED_OUT


def test_the_sweep_resumes_a_parent_whose_resume_was_lost(live_db: None, sent: Sent) -> None:
    parent, child = _team(child_status=ExecutionStatus.COMPLETED)
    waiting, _ = _team(child_status=ExecutionStatus.RUNNING)
    ended = timezone.now() - datetime.timedelta(minutes=2)
    with tenancy.agency_context(parent.agency_id):
        Execution.objects.filter(pk=child.pk).update(completed_at=ended)
        # An older run it delegated to, ended too: not the one it waits for.
        ExecutionFactory.create(
            agent=child.agent,
            parent=parent,
            trigger_type=TriggerType.AGENT,
            status=ExecutionStatus.FAILED,
            completed_at=ended,
            initial_context={"delegation": {"queue": QUEUE}},
        )
    from teams import tasks

    tasks.expire_waits()

    assert _fresh(parent).status == ExecutionStatus.PENDING
    assert _fresh(waiting).status == ExecutionStatus.WAITING_AGENT  # its run goes on
    with tenancy.agency_context(parent.agency_id):
        [answer] = AgentMessage.objects.filter(to_execution=parent, is_request=False)
    assert answer.from_execution_id == child.id
