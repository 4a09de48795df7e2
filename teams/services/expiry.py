"""The expiry of a delegating run's wait: a delayed message for its deadline, and the run still
waiting at its deadline timed out (the runs it waits for are cancelled with it)."""

from __future__ import annotations

import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents import lifecycle
from agents.models import Execution, ExecutionStatus, StopReason
from core.sending import send_task_on_commit


def wait_expire(execution: Execution, *, now: datetime.datetime) -> bool:
    """End a run still waiting for another agent past its deadline: it times out, and the runs
    it waits for are cancelled. False when it moved on first. Precondition: agency context."""
    with transaction.atomic():
        locked = Execution.objects.select_for_update().get(pk=execution.pk)
        if (
            locked.status != ExecutionStatus.WAITING_AGENT
            or locked.wait_until is None
            or locked.wait_until > now
        ):
            return False
        agent = (locked.input_request or {}).get("agent", "another agent")
        # Its delegate_to_agent call is cancelled with it (approvals' run-ended listener).
        lifecycle.finish_execution(
            locked,
            status=ExecutionStatus.TIMED_OUT,
            stop_reason=StopReason.TIMEOUT,
            error=f"Reached its deadline ({locked.wait_until:%Y-%m-%d %H:%M:%S} UTC) while "
            f"waiting for the {agent} agent's run.",
        )
        locked.save()
        return True


def schedule_expiry(execution: Execution) -> None:
    """Once the park commits, a delayed message for the wait's deadline (beat's sweep,
    teams.expire_waits, ends any whose message is lost or too far ahead for the broker)."""
    until = execution.wait_until
    if until is None:
        return
    if (until - timezone.now()).total_seconds() > settings.AGENTDESK_PRECISE_WAKE_MAX_SECONDS:
        return
    send_task_on_commit(
        "teams.expire_wait",
        execution.id,
        agency_id=execution.agency_id,
        eta=until + datetime.timedelta(milliseconds=200),
        about=f"execution {execution.id}",
        then="beat's sweep (teams.expire_waits) ends the wait",
    )
