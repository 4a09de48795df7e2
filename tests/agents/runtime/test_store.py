"""The step transaction's lease fencing: a worker whose lease was taken over writes nothing.

Run on committed data (``live_db``) so the step takes the production path (statement and COMMIT
in one pipeline round trip), and inside a test transaction for the nested path.
"""

from __future__ import annotations

import datetime
import importlib
import uuid
from decimal import Decimal

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from agents import lifecycle
from agents.models import Execution, ExecutionStatus, ExecutionStep, StateTransition, StepType
from agents.runtime import store
from agents.services import execution_cancel
from core import fastdb, tenancy
from tests.agents.factories import AgentFactory, ExecutionFactory
from tests.protocol import round_trips


def _running_execution(owner: str) -> Execution:
    agent = AgentFactory.create()
    with tenancy.agency_context(agent.agency_id):
        return Execution.objects.create(
            agency_id=agent.agency_id,
            agent=agent,
            site_id=agent.site_id,
            trigger_type="manual",
            status=ExecutionStatus.RUNNING,
            lease_owner=owner,
            lease_expires_at=store.lease_deadline(),
        )


def _step_numbers(execution: Execution) -> list[int]:
    with tenancy.agency_context(execution.agency_id):
        return list(execution.steps.values_list("step_number", flat=True))


def _write_step(execution: Execution, worker: str, *, direct: bool = False) -> None:
    write = store.direct_step if direct else store.step_transaction
    with write(execution, worker) as tx:
        tx.add_step(StepType.THINK, reasoning="thinking")


# step_transaction: Django's transaction, statement and COMMIT pipelined at its end.
# direct_step: a model reply's whole transaction in one round trip, outside Django's.
WRITERS = pytest.mark.parametrize("direct", [False, True], ids=["step_transaction", "direct"])


@WRITERS
def test_the_lease_holder_commits_its_step_and_reads_the_cancel_flag(
    live_db: None, direct: bool
) -> None:
    execution = _running_execution("worker-a")
    _write_step(execution, "worker-a", direct=direct)
    assert _step_numbers(execution) == [1]
    assert not connection.in_atomic_block
    assert connection.connection.info.transaction_status.name == "IDLE"

    with tenancy.agency_context(execution.agency_id):
        Execution.objects.filter(pk=execution.pk).update(cancel_requested_at=store.lease_deadline())
    _write_step(execution, "worker-a", direct=direct)
    assert execution.cancel_requested_at is not None  # returned by the step's own statement
    assert _step_numbers(execution) == [1, 2]


@WRITERS
def test_a_worker_that_lost_its_lease_writes_nothing(live_db: None, direct: bool) -> None:
    execution = _running_execution("worker-b")  # the reaper handed the run to worker-b
    stale = Execution(**{f.attname: getattr(execution, f.attname) for f in Execution._meta.fields})

    with pytest.raises(store.LeaseLost):
        _write_step(stale, "worker-a", direct=direct)

    assert _step_numbers(execution) == []  # the step's insert rode in the rolled-back statement
    with tenancy.agency_context(execution.agency_id):
        assert Execution.objects.get(pk=execution.pk).lease_owner == "worker-b"
    # The connection is clean for the next user of the pool.
    assert connection.connection.info.transaction_status.name == "IDLE"
    _write_step(execution, "worker-b")
    assert _step_numbers(execution) == [1]


@pytest.mark.django_db
def test_lease_loss_inside_a_callers_transaction_raises_and_leaves_the_rollback_to_it() -> None:
    execution = _running_execution("worker-b")
    with pytest.raises(store.LeaseLost), transaction.atomic():
        _write_step(execution, "worker-a")
    assert _step_numbers(execution) == []


def test_a_reply_write_on_a_dead_connection_fails_and_the_next_one_gets_a_fresh_connection(
    live_db: None,
) -> None:
    import psycopg
    from django.db import DatabaseError

    from tests.conftest import _maintenance_conninfo

    execution = _running_execution("worker-a")
    connection.ensure_connection()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    with psycopg.connect(_maintenance_conninfo(), autocommit=True) as admin:  # a superuser
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])

    with pytest.raises(DatabaseError):
        _write_step(execution, "worker-a", direct=True)
    assert _step_numbers(execution) == []
    _write_step(execution, "worker-a", direct=True)  # a fresh connection from the pool
    assert len(_step_numbers(execution)) == 1


def test_a_model_reply_is_one_round_trip_and_a_step_without_queries_too(live_db: None) -> None:
    execution = _running_execution("worker-a")
    with round_trips() as direct:
        _write_step(execution, "worker-a", direct=True)
    # The tenant settings and the step statement in one pipeline, committed at its Sync.
    assert direct == [1]
    with round_trips() as deferred:
        _write_step(execution, "worker-a")
    # BEGIN, the settings, the statement and COMMIT: the step transaction had no other query.
    assert deferred == [1]
    assert _step_numbers(execution) == [1, 2]


@pytest.mark.django_db
def test_a_state_held_longer_than_an_int4_of_milliseconds_still_ends() -> None:
    """An approval nobody decided for a month: cancelling the run must not fail on the state's
    or the run's duration (int4 milliseconds hold ~24.8 days)."""
    month_ago = timezone.now() - datetime.timedelta(days=30)
    execution = ExecutionFactory.create(
        status=ExecutionStatus.WAITING_APPROVAL, started_at=month_ago, sequence=1
    )
    with tenancy.agency_context(execution.agency_id):
        StateTransition.objects.create(
            agency_id=execution.agency_id,
            execution=execution,
            to_state=ExecutionStatus.WAITING_APPROVAL,
            sequence=1,
            entered_at=month_ago,
        )
        cancelled = execution_cancel(execution=execution)
        waited = StateTransition.objects.get(execution=execution, sequence=1)
    assert cancelled.status == ExecutionStatus.CANCELLED
    assert cancelled.duration_ms == lifecycle.INT4_MAX
    assert waited.duration_ms == lifecycle.INT4_MAX
    assert waited.exited_at is not None


@pytest.mark.django_db
def test_the_migration_closes_states_written_before_states_were_closed() -> None:
    """agents 0009: each old state closed at the next one's start; the latest stays open."""
    close_past_states = importlib.import_module(
        "agents.migrations.0009_close_past_states"
    ).CLOSE_PAST_STATES
    start = timezone.now() - datetime.timedelta(minutes=5)
    execution = ExecutionFactory.create(status=ExecutionStatus.COMPLETED)
    with tenancy.agency_context(execution.agency_id):
        for sequence, (state, offset) in enumerate(
            [("pending", 0.0), ("running", 1.5), ("completed", 4.0)], start=1
        ):
            StateTransition.objects.create(
                agency_id=execution.agency_id,
                execution=execution,
                to_state=state,
                sequence=sequence,
                entered_at=start + datetime.timedelta(seconds=offset),
            )
    with tenancy.platform_context(), connection.cursor() as cursor:
        cursor.execute(close_past_states)
    with tenancy.agency_context(execution.agency_id):
        states = list(
            execution.state_transitions.order_by("sequence").values_list("exited_at", "duration_ms")
        )
    assert states == [
        (start + datetime.timedelta(seconds=1.5), 1500),
        (start + datetime.timedelta(seconds=4.0), 2500),
        (None, None),
    ]


# step_transaction(commit_later=True): the statement and COMMIT go out, the block ends without
# waiting, and settle_in_flight() collects them (the runtime: just before the model request).
def _send_step(execution: Execution, worker: str, hooks: list[str]) -> None:
    with store.step_transaction(execution, worker, commit_later=True) as tx:
        tx.add_step(StepType.ACT, tool_name="crm_get_contact", tool_output={"ok": True})
        transaction.on_commit(lambda: hooks.append("ran"))
    assert tx.commit_sent


def test_a_commit_left_in_flight_is_collected_with_its_hooks_and_cancel_flag(
    live_db: None,
) -> None:
    execution = _running_execution("worker-a")
    with tenancy.agency_context(execution.agency_id):
        Execution.objects.filter(pk=execution.pk).update(cancel_requested_at=store.lease_deadline())
    hooks: list[str] = []
    with round_trips() as counted:
        _send_step(execution, "worker-a", hooks)
        assert store.commit_in_flight()
        assert hooks == []  # on-commit hooks wait for the commit to be confirmed
        assert execution.cancel_requested_at is None  # not known before the statement's result
        assert store.settle_in_flight()
    assert counted == [1]  # BEGIN, settings, statement and COMMIT sent together; one Sync
    assert hooks == ["ran"]
    assert execution.cancel_requested_at is not None
    assert not store.commit_in_flight()
    assert not store.settle_in_flight()
    assert _step_numbers(execution) == [1]
    assert connection.get_autocommit()
    assert connection.connection.info.transaction_status.name == "IDLE"


def test_a_query_while_a_commit_is_in_flight_collects_it_first(live_db: None) -> None:
    execution = _running_execution("worker-a")
    hooks: list[str] = []
    _send_step(execution, "worker-a", hooks)
    # Through Django's cursor outside any tenant block: settled before the query runs.
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)
    assert not store.commit_in_flight()
    assert hooks == ["ran"]
    assert connection.get_autocommit()
    # A tenant block (every transaction of the platform opens one) settles on entry.
    _send_step(execution, "worker-a", hooks)
    assert _step_numbers(execution) == [1, 2]
    assert hooks == ["ran", "ran"]
    # And so does every entry point of the store.
    _send_step(execution, "worker-a", hooks)
    _write_step(execution, "worker-a", direct=True)
    assert _step_numbers(execution) == [1, 2, 3, 4]


def test_a_commit_in_flight_that_fails_at_commit_runs_no_hooks_and_leaves_a_clean_connection(
    live_db: None,
) -> None:
    """Foreign keys are checked at COMMIT (deferrable): the error comes with the result."""
    execution = _running_execution("worker-a")
    hooks: list[str] = []
    orphan = Execution(agency_id=execution.agency_id, id=uuid.uuid4())  # never inserted
    with store.step_transaction(execution, "worker-a", commit_later=True) as tx:
        tx.add_step(StepType.ACT, tool_name="crm_get_contact", tool_output={})
        transaction.on_commit(lambda: hooks.append("ran"))
        tx.defer_row(
            fastdb.row(
                ExecutionStep,
                {
                    "id": uuid.uuid4(),
                    "agency_id": execution.agency_id,
                    "execution_id": orphan.id,
                    "step_number": 1,
                    "step_type": StepType.OBSERVE,
                },
            )
        )
    assert tx.commit_sent
    with pytest.raises(IntegrityError):
        store.settle_in_flight()
    assert hooks == []
    assert connection.get_autocommit()
    assert connection.connection.info.transaction_status.name == "IDLE"
    assert _step_numbers(execution) == []


def test_a_commit_in_flight_of_a_worker_that_lost_its_lease_writes_nothing(
    live_db: None,
) -> None:
    execution = _running_execution("worker-b")
    stale = Execution(**{f.attname: getattr(execution, f.attname) for f in Execution._meta.fields})
    hooks: list[str] = []

    def send_and_settle() -> None:
        _send_step(stale, "worker-a", hooks)
        store.settle_in_flight()

    # Raised when the commit is collected; or already while it is sent, if the statement's error
    # has come back by then (a busy machine).
    with pytest.raises(store.LeaseLost):
        send_and_settle()
    assert hooks == []
    assert not store.commit_in_flight()
    # Rolled back, out of Django's manual transaction mode: the connection serves the next step.
    assert connection.get_autocommit()
    assert connection.connection.info.transaction_status.name == "IDLE"
    assert _step_numbers(execution) == []
    _write_step(execution, "worker-b")
    assert _step_numbers(execution) == [1]


def test_a_step_that_parks_the_run_commits_at_once_even_if_asked_to_commit_later(
    live_db: None,
) -> None:
    execution = _running_execution("worker-a")
    with store.step_transaction(execution, "worker-a", commit_later=True) as tx:
        tx.add_step(StepType.ACT, tool_name="wait", tool_output={"waiting": True})
        tx.park(ExecutionStatus.WAITING_INPUT, reason="a timer")
    assert not tx.commit_sent
    assert not store.commit_in_flight()
    assert connection.get_autocommit()
    assert _step_numbers(execution) == [1]


def test_a_failing_step_body_in_manual_mode_rolls_back_and_leaves_manual_mode(
    live_db: None,
) -> None:
    execution = _running_execution("worker-a")

    def failing_step() -> None:
        with store.step_transaction(execution, "worker-a", commit_later=True) as tx:
            tx.add_step(StepType.ACT, tool_name="crm_get_contact", tool_output={})
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")  # the transaction has started on the server
            raise RuntimeError("the handler's bug")

    with pytest.raises(RuntimeError):
        failing_step()
    assert not store.commit_in_flight()
    assert connection.get_autocommit()
    assert connection.connection.info.transaction_status.name == "IDLE"
    assert _step_numbers(execution) == []


def test_a_worker_whose_lease_ran_out_during_its_call_does_not_give_its_reservation_back_twice(
    live_db: None,
) -> None:
    """Worker A reserves for its model call and stalls past its lease; the reaper hands the run
    to worker B, whose claim gives A's reservation back, and B reserves for its own call. A's
    call then fails: A must not release again (B's reservation, or another run's, would go)."""
    from agents.runtime.loop import _Run
    from agents.runtime.setup import build_snapshot
    from usage import services as usage_services
    from usage.models import Budget

    execution = _running_execution("worker-a")
    agent = execution.agent
    with tenancy.agency_context(execution.agency_id):
        budget = Budget.objects.create(agency_id=execution.agency_id, limit_usd=Decimal(10))
        execution.config_snapshot = dict(build_snapshot(agent, execution))
        execution.save(update_fields=["config_snapshot"])

    def reserve(run: Execution, worker: str, amount: Decimal) -> None:
        with tenancy.agency_context(execution.agency_id):
            fits, budget_id = usage_services.budget_reserve(
                agency_id=execution.agency_id, amount=amount
            )
            assert fits
            assert budget_id == budget.id
            store.record_budget_reservation(run, worker, budget_id=budget_id, amount=amount)

    def reserved() -> Decimal:
        with tenancy.agency_context(execution.agency_id):
            return Budget.objects.get(pk=budget.pk).reserved_usd

    reserve(execution, "worker-a", Decimal(1))
    stalled = _Run(execution, agent, "worker-a")
    with tenancy.agency_context(execution.agency_id):  # the reaper: A's lease ran out
        Execution.objects.filter(pk=execution.pk).update(
            lease_owner="", lease_expires_at=timezone.now() - datetime.timedelta(seconds=1)
        )
    with tenancy.agency_context(execution.agency_id):
        claim = store.claim(execution.id, worker="worker-b")
        assert claim is not None
        claim.tx.save()
    assert reserved() == 0  # B's claim gave A's back
    b_run = claim.execution
    reserve(b_run, "worker-b", Decimal("0.5"))
    b_reservation = b_run.budget_reservation

    stalled._release_budget((budget.id, Decimal(1)))  # A's call failed

    assert reserved() == Decimal("0.5")
    with tenancy.agency_context(execution.agency_id):
        assert Execution.objects.get(pk=execution.pk).budget_reservation == b_reservation
