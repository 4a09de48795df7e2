"""Resuming a waiting run: a delayed wake-up for its timer, the timer's end (a ``wait``, a
provider's rate limit), and what it waited for answered (a question, a decision, a delegated
run's end); the run becomes pending again and is delivered once the transaction commits."""

from __future__ import annotations

import datetime
import random

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents import lifecycle
from agents.lifecycle.states import PROVIDER_RATE_LIMIT_WAIT
from agents.models import Execution, ExecutionStatus, StepType, TransitionType
from agents.services.start import enqueue_execution
from core.sending import send_task_on_commit

WAKE_TASK = "agents.wake_execution"  # agents.tasks.wake_execution
WAKE_JITTER_MS = 500


def schedule_wake(execution: Execution) -> None:
    """Once the current transaction commits, send the parked run a delayed message for its
    ``wait_until`` (a ``wait`` timer, a provider's rate limit), so that it resumes on time and
    not at the reaper's next tick. Only for waits up to AGENTDESK_PRECISE_WAKE_MAX_SECONDS (a
    broker holds a delayed message only so long); beat's timer check wakes the others, and any
    run whose message is lost. A failed send is logged, not raised, for the same reason."""
    until = execution.wait_until
    if until is None:
        return
    if (until - timezone.now()).total_seconds() > settings.AGENTDESK_PRECISE_WAKE_MAX_SECONDS:
        return
    # Up to half a second late: runs parked until the same instant (a rate limit's minute) do
    # not all wake, and race for the new window, at once.
    eta = until + datetime.timedelta(milliseconds=random.randint(0, WAKE_JITTER_MS))  # noqa: S311
    send_task_on_commit(
        WAKE_TASK,
        execution.id,
        agency_id=execution.agency_id,
        eta=eta,
        about=f"execution {execution.id}",
        then="beat's timer check wakes it",
    )


def execution_resume_due(execution: Execution, *, now: datetime.datetime) -> Execution:
    """Resume a ``waiting_input`` run whose timer is due by ``now``: a provider rate limit's
    window is over (no observation: nothing happened the model should hear of), or its ``wait``
    is. Everything is decided on the locked row: a due list read earlier (beat's, or a delayed
    wake-up's) may name a run resumed, and parked again for later or for another reason, since.
    Precondition: agency context."""
    with transaction.atomic():
        locked = Execution.objects.select_for_update().get(pk=execution.pk)
        if (
            locked.status != ExecutionStatus.WAITING_INPUT
            or locked.wait_until is None
            or locked.wait_until > now
        ):
            return locked
        if locked.input_request.get("kind") == PROVIDER_RATE_LIMIT_WAIT:
            return _resume(locked, observation=None, reason="provider rate limit window over")
        return _resume(
            locked,
            observation=f"The wait is over (it was set until {locked.wait_until}).",
            reason="wait timer due",
        )


def execution_resume(
    *, execution: Execution, observation: str | None, reason: str, queue: str | None = None
) -> Execution:
    """A waiting run becomes pending again, with what it waited for as a new observation (none:
    what it waited for is a tool call's result, which the resumed run reads).

    For answered questions and decisions, and the end of the run a delegating run waited for
    (a timer's end: execution_resume_due). ``queue``: where the run is delivered (default: the
    default queue). Precondition: agency context.
    """
    with transaction.atomic():
        locked = Execution.objects.select_for_update().get(pk=execution.pk)
        if locked.status not in _RESUMABLE:
            return locked
        return _resume(locked, observation=observation, reason=reason, queue=queue)


_RESUMABLE = frozenset(
    {ExecutionStatus.WAITING_INPUT, ExecutionStatus.WAITING_APPROVAL, ExecutionStatus.WAITING_AGENT}
)


def _resume(
    locked: Execution, *, observation: str | None, reason: str, queue: str | None = None
) -> Execution:
    """Make the locked waiting run pending again (its observation, if any, as a new step) and
    deliver it once the transaction commits."""
    if observation is not None:
        locked.current_step += 1
        locked.steps.create(
            agency_id=locked.agency_id,
            step_number=locked.current_step,
            step_type=StepType.OBSERVE,
            input_text=observation,
            started_at=timezone.now(),
            completed_at=timezone.now(),
        )
    lifecycle.record_transition(
        locked, ExecutionStatus.PENDING, reason=reason, transition_type=TransitionType.NORMAL
    )
    locked.wait_until = None
    locked.input_request = {}
    locked.save(
        update_fields=[
            "status", "sequence", "current_step", "wait_until", "input_request", "updated_at",
        ]
    )  # fmt: skip
    enqueue_execution(locked, queue=queue)
    return locked
