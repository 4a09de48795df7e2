"""An approver deciding while someone cancels the same run: both take the run's row and its
approval's, and in the same order, so neither waits on the other in a cycle (PostgreSQL would
abort one of them with a deadlock error). Two real transactions on two connections."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import connection, connections

from agents.models import Execution, ExecutionStatus
from agents.services import execution_cancel
from approvals.models import Approval, ApprovalStatus
from approvals.services import approval_decide
from core import tenancy
from core.exceptions import ApplicationError
from tests.agents.factories import ExecutionFactory
from tests.approvals.factories import ApprovalFactory
from tests.tools.factories import ToolCallFactory
from tools.models import ToolCallStatus


def _waiting_for_a_lock_of_this_session() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks"
            " WHERE NOT granted AND pg_backend_pid() = ANY(pg_blocking_pids(pid))"
        )
        return int(cursor.fetchone()[0])


def test_an_approval_decided_while_its_run_is_cancelled_neither_deadlocks(live_db: None) -> None:
    execution = ExecutionFactory.create(status=ExecutionStatus.WAITING_APPROVAL)
    call = ToolCallFactory.create(execution=execution, status=ToolCallStatus.WAITING_APPROVAL)
    approval = ApprovalFactory.create(tool_call=call)
    decided: dict[str, Any] = {}

    def decide() -> None:  # the approver, on a connection of its own
        try:
            with tenancy.agency_context(execution.agency_id):
                approval_decide(approval=approval, approve=True, user_id=None)
            decided["outcome"] = "approved"
        except Exception as exc:
            decided["outcome"] = exc
        finally:
            connections.close_all()

    approver = threading.Thread(target=decide)
    with tenancy.agency_context(execution.agency_id):
        # The canceller holds the run's row (as execution_cancel's first step does) while the
        # approver starts deciding.
        Execution.objects.select_for_update().get(pk=execution.pk)
        approver.start()
        deadline = time.monotonic() + 10
        while not _waiting_for_a_lock_of_this_session():
            assert time.monotonic() < deadline, "the approver never waited for the run"
            time.sleep(0.02)
        # The approver waits for the run's row; it must not hold the approval's meanwhile,
        # which the cancel now updates.
        execution_cancel(execution=execution)
    approver.join(10)

    assert not approver.is_alive()
    outcome = decided["outcome"]
    assert isinstance(outcome, ApplicationError), outcome  # not a deadlock error
    assert outcome.code == "already_decided"
    with tenancy.agency_context(execution.agency_id):
        assert Execution.objects.get(pk=execution.pk).status == ExecutionStatus.CANCELLED
        assert Approval.objects.get(pk=approval.pk).status == ApprovalStatus.CANCELLED


@pytest.mark.parametrize("approve", [True, False])
def test_a_decision_on_a_waiting_run_still_takes_effect(live_db: None, approve: bool) -> None:
    execution = ExecutionFactory.create(status=ExecutionStatus.WAITING_APPROVAL)
    call = ToolCallFactory.create(execution=execution, status=ToolCallStatus.WAITING_APPROVAL)
    approval = ApprovalFactory.create(tool_call=call)
    with tenancy.agency_context(execution.agency_id):
        decided = approval_decide(approval=approval, approve=approve, user_id=None, reason="why")
        run = Execution.objects.get(pk=execution.pk)
    assert decided.status == (ApprovalStatus.APPROVED if approve else ApprovalStatus.DENIED)
    assert run.status == (ExecutionStatus.PENDING if approve else ExecutionStatus.CANCELLED)
