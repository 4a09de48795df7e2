"""Stuck detection (issue 19, seed 003's "find agents currently stuck"), run by beat
(flow.tasks.detect_stuck_runs): a run in one state longer than expected is flagged once per state
it entered, shown on the staff home, announced (``ai.execution.stuck``, the agency's approvers
and admins notified in the app and by e-mail) and, per the agent's ``stuck_action``, cancelled
(stop reason ``stuck``).

How long is expected: the state's ``max_duration_seconds`` in the agent's expected workflow if it
names one, else the agent's ``stuck_after_seconds`` — the latter only for pending, running and
waiting_agent: a run waiting for a person (approval, answer) or a timer has its own expiry
(``human_timeout_minutes``, the timer) and is flagged only when its workflow says how long.
"""

from __future__ import annotations

import datetime
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.mail import send_mass_mail
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.urls import reverse
from django.utils import timezone

from agents import lifecycle
from agents.models import (
    Agent,
    Execution,
    ExecutionStatus,
    StateTransition,
    StopReason,
    StuckAction,
)
from approvals import notify
from core import tenancy
from core.events import event_emit
from core.models import ActorType
from core.realtime import agency_group, broadcast_on_commit
from core.sending import send_task_on_commit
from flow.models import ExpectedWorkflow, StuckOutcome, StuckRun, workflow_for

logger = logging.getLogger(__name__)

STUCK_EVENT = "ai.execution.stuck"
NOTIFY_TASK = "flow.notify_stuck"
# Watched with the agent's stuck_after_seconds; the others only when a workflow says how long.
WATCHED_BY_DEFAULT = (
    ExecutionStatus.PENDING,
    ExecutionStatus.RUNNING,
    ExecutionStatus.WAITING_AGENT,
)
WATCHABLE = (*WATCHED_BY_DEFAULT, ExecutionStatus.WAITING_APPROVAL, ExecutionStatus.WAITING_INPUT)
MIN_SECONDS = 1  # below every threshold: what the candidate query leaves out
BATCH = 500


@dataclass(frozen=True)
class Candidate:
    execution_id: uuid.UUID
    agency_id: uuid.UUID
    agent_id: uuid.UUID
    state: str
    sequence: int
    entered_at: datetime.datetime


def expected_seconds(
    agent: Agent, workflow: ExpectedWorkflow | None, state: str
) -> tuple[int, str] | None:
    """How long a run of ``agent`` may stay in ``state``, and where that comes from."""
    if workflow is not None:
        for expected in workflow.expected_states:
            if expected.get("state") == state and expected.get("max_duration_seconds"):
                return int(expected["max_duration_seconds"]), "workflow"
    if state in WATCHED_BY_DEFAULT:
        return int(agent.stuck_after_seconds), "agent"
    return None


def candidates(*, now: datetime.datetime) -> list[Candidate]:
    """Open states (their transition not yet exited) of runs still in them, not flagged yet,
    across agencies. Precondition: the platform context."""
    flagged = StuckRun.objects.filter(
        execution_id=OuterRef("execution_id"), state_sequence=OuterRef("sequence")
    )
    rows = (
        StateTransition.objects.filter(
            exited_at__isnull=True,
            to_state__in=WATCHABLE,
            entered_at__lte=now - datetime.timedelta(seconds=MIN_SECONDS),
        )
        .filter(~Exists(flagged))
        .order_by("entered_at")
        .values_list(
            "execution_id", "agency_id", "execution__agent_id", "to_state", "sequence", "entered_at"
        )[:BATCH]
    )
    return [Candidate(*row) for row in rows]


def detect(*, now: datetime.datetime | None = None) -> int:
    """Flag (and escalate) what is stuck now; returns how many runs were flagged."""
    now = now or timezone.now()
    with tenancy.platform_context():
        found = candidates(now=now)
    flagged = 0
    by_agency: dict[uuid.UUID, list[Candidate]] = {}
    for candidate in found:
        by_agency.setdefault(candidate.agency_id, []).append(candidate)
    for agency_id, group in by_agency.items():
        with tenancy.agency_context(agency_id):
            agents = Agent.objects.in_bulk({c.agent_id for c in group})
            workflows = {pk: workflow_for(agent) for pk, agent in agents.items()}
        for candidate in group:
            agent = agents.get(candidate.agent_id)
            if agent is None:
                continue
            expected = expected_seconds(agent, workflows.get(agent.pk), candidate.state)
            if expected is None:
                continue
            seconds, source = expected
            if (now - candidate.entered_at).total_seconds() <= seconds:
                continue
            with tenancy.agency_context(agency_id):
                flagged += flag(candidate, agent, seconds=seconds, source=source, now=now)
    return flagged


def flag(
    candidate: Candidate, agent: Agent, *, seconds: int, source: str, now: datetime.datetime
) -> bool:
    """Flag one run stuck in its state, once, and escalate. False if it moved on meanwhile.
    Precondition: the agency's context."""
    with transaction.atomic():
        execution = Execution.objects.select_for_update().filter(pk=candidate.execution_id).first()
        if execution is None or execution.status != candidate.state or execution.is_terminal:
            return False
        still_open = StateTransition.objects.filter(
            execution_id=execution.pk, sequence=candidate.sequence, exited_at__isnull=True
        ).exists()
        if (
            not still_open
            or StuckRun.objects.filter(
                execution_id=execution.pk, state_sequence=candidate.sequence
            ).exists()
        ):
            return False
        outcome: str = StuckOutcome.NOTIFIED
        if agent.stuck_action == StuckAction.CANCEL:
            outcome = _cancel(execution, candidate, seconds=seconds, now=now)
        stuck = StuckRun.objects.create(
            agency_id=execution.agency_id,
            execution=execution,
            agent=agent,
            state=candidate.state,
            state_sequence=candidate.sequence,
            entered_at=candidate.entered_at,
            expected_seconds=seconds,
            expected_from=source,
            action_taken=outcome,
            flagged_at=now,
        )
        _emit(stuck, agent)
        _notify_on_commit(stuck, agent)
    logger.warning(
        "execution %s stuck in %s for %ds (expected %ds): %s",
        execution.pk,
        candidate.state,
        (now - candidate.entered_at).total_seconds(),
        seconds,
        outcome,
    )
    return True


def _reason(state: str, seconds: int) -> str:
    return f"Stuck: in {state} longer than expected ({seconds} s); cancelled by stuck detection."


def _cancel(
    execution: Execution, candidate: Candidate, *, seconds: int, now: datetime.datetime
) -> str:
    """As the cancel service (agents.services.cancel.execution_cancel) does, with the stop
    reason ``stuck``: a run whose worker holds it gets the cancel request (the worker ends it at
    its next check, with this reason: :func:`cancel_reason`), any other ends now (its pending
    decisions cancelled with it: approvals' run-ended listener).
    Precondition: the run's row locked."""
    execution.cancel_requested_at = execution.cancel_requested_at or now
    if (
        execution.status == ExecutionStatus.RUNNING
        and execution.lease_owner
        and execution.lease_expires_at is not None
        and execution.lease_expires_at > now
    ):
        execution.save(update_fields=["cancel_requested_at", "updated_at"])
        return StuckOutcome.CANCEL_REQUESTED
    lifecycle.finish_execution(
        execution,
        status=ExecutionStatus.CANCELLED,
        stop_reason=StopReason.STUCK,
        error=_reason(candidate.state, seconds),
        error_details={"stuck": {"state": candidate.state, "expected_seconds": seconds}},
    )
    execution.save()
    return StuckOutcome.CANCELLED


def cancel_reason(execution: Execution) -> tuple[str, str] | None:
    """(stop reason, error) for a run whose worker found a cancel request that stuck detection
    asked for, else None. Precondition: off any open transaction of the run (a query)."""
    with tenancy.agency_context(execution.agency_id):
        stuck = (
            StuckRun.objects.filter(
                execution_id=execution.id, action_taken=StuckOutcome.CANCEL_REQUESTED
            )
            .values_list("state", "expected_seconds")
            .first()
        )
    if stuck is None:
        return None
    return StopReason.STUCK, _reason(stuck[0], stuck[1])


def run_url(execution_id: uuid.UUID | str) -> str:
    return reverse("admin:agents_execution_change", args=[execution_id])


def _message(stuck: StuckRun, agent: Agent) -> str:
    minutes = max(1, round((stuck.flagged_at - stuck.entered_at).total_seconds() / 60))
    what = {
        StuckOutcome.NOTIFIED: "",
        StuckOutcome.CANCELLED: " It was cancelled.",
        StuckOutcome.CANCEL_REQUESTED: " It is being cancelled.",
    }[StuckOutcome(stuck.action_taken)]
    return (
        f"A run of {agent.name} is stuck: {stuck.state} for {minutes} min "
        f"(expected at most {stuck.expected_seconds} s).{what}"
    )


def _emit(stuck: StuckRun, agent: Agent) -> None:
    event_emit(
        agency_id=stuck.agency_id,
        site_id=agent.site_id,
        event_type=STUCK_EVENT,
        payload={
            "execution_id": str(stuck.execution_id),
            "agent_id": str(agent.pk),
            "state": stuck.state,
            "entered_at": stuck.entered_at.isoformat(),
            "stuck_seconds": int((stuck.flagged_at - stuck.entered_at).total_seconds()),
            "expected_seconds": stuck.expected_seconds,
            "expected_from": stuck.expected_from,
            "action": stuck.action_taken,
        },
        source_module="flow",
        source_entity_type="execution",
        source_entity_id=str(stuck.execution_id),
        actor_type=ActorType.SYSTEM,
    )


def _notify_on_commit(stuck: StuckRun, agent: Agent) -> None:
    """In the app (the agency's socket: every admin page shows it) and, after the commit, by
    e-mail to the agency's admins and approvers (approvals.notify's deciders)."""
    broadcast_on_commit(
        [agency_group(stuck.agency_id)],
        {
            "type": "notification",
            "level": "warning",
            "message": _message(stuck, agent),
            "kind": "stuck",
            "item_id": str(stuck.execution_id),
            "url": run_url(stuck.execution_id),
        },
    )
    if not settings.AGENTDESK_NOTIFY_BY_EMAIL:
        return
    send_task_on_commit(
        NOTIFY_TASK,
        stuck.id,
        agency_id=stuck.agency_id,
        about=f"stuck run {stuck.execution_id}",
        then="it is flagged and shown on the home; only the e-mail is lost",
    )


def send_stuck_emails(stuck: StuckRun) -> int:
    """One e-mail to each of the agency's deciders about a stuck run. Precondition: the
    agency's context."""
    recipients = notify.decider_emails(stuck.agency_id)
    if not recipients:
        return 0
    agent: Any = stuck.agent
    subject = " ".join(f"[AgentDesk] Stuck run: {agent.name} in {stuck.state}".split())[:200]
    body = "\n".join(
        [
            _message(stuck, agent),
            "",
            f"Open the run: {settings.AGENTDESK_BASE_URL.rstrip('/')}{run_url(stuck.execution_id)}",
        ]
    )
    return send_mass_mail(
        [(subject, body, settings.DEFAULT_FROM_EMAIL, [to]) for to in recipients],
        fail_silently=False,
    )
