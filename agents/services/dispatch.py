"""An event's dispatch: a run started for every agent of the agency subscribed to its type,
unless the event does not concern it (its own ``ai.*`` event, a chain of runs too deep, its
trigger conditions unmet): then its trigger is logged as skipped."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents.models import Agent, Execution, SkipReason, TriggerType
from agents.services.start import execution_create, log_skip, trigger_log
from agents.triggers import InvalidConditions, unmet_condition, validate_conditions
from core.events import subscriptions_for
from core.models import Event


def _parent_run(event: Event) -> uuid.UUID | None:
    """The run whose event this is, if it still exists: one deleted since (with its agent)
    leaves its children without a parent, not the event without its dispatch (the foreign key
    would fail the whole dispatch at commit)."""
    source = event.source_execution_id
    if source is None:
        return None
    return Execution.objects.filter(pk=source).values_list("pk", flat=True).first()


def agents_subscribed(*, agency_id: uuid.UUID, event_type: str) -> list[Agent]:
    """Active or not: an inactive subscriber's trigger is logged as skipped, not ignored.
    In id order: the dispatch takes each one's run-limit lock in this order, so that two
    dispatches never wait for each other's."""
    return list(
        Agent.objects.filter(
            agency_id=agency_id, trigger_events__overlap=subscriptions_for(event_type)
        ).order_by("id")
    )


def _event_skip(agent: Agent, event: Event) -> tuple[str, str] | None:
    """Why ``event`` does not concern ``agent`` (the self-trigger and chain guards, its
    conditions)."""
    limit = settings.AGENTDESK_MAX_RUN_CHAIN_DEPTH
    if event.chain_depth > limit:
        # Agents that start each other through events (A's run emits what B subscribes to, and
        # B's what A does) would otherwise run, and spend, without end.
        return (
            SkipReason.CHAIN_TOO_DEEP,
            f"the event comes from a chain of {event.chain_depth} agent runs, each after the "
            f"first started by the previous one's event (AGENTDESK_MAX_RUN_CHAIN_DEPTH is "
            f"{limit})",
        )
    if str(event.actor_id) == str(agent.id) and event.event_type.startswith("ai."):
        # No reason of its own (CHECK constraint): a condition every agent has.
        return (
            SkipReason.CONDITIONS_NOT_MET,
            "the event is this agent's own ai.* event; an agent never triggers itself",
        )
    conditions = agent.trigger_conditions
    if not conditions:
        return None
    try:
        validate_conditions(conditions)
    except InvalidConditions as exc:  # stored before they were checked on save
        return SkipReason.ERROR, f"trigger_conditions are invalid: {exc}"
    unmet = unmet_condition(conditions, event.payload)
    return (SkipReason.CONDITIONS_NOT_MET, unmet) if unmet else None


def event_dispatch(*, event: Event) -> list[Execution]:
    """Start every agent of the event's agency subscribed to its type (logging skips).

    Idempotent: an event already processed starts nothing. Precondition: agency context.
    """
    with transaction.atomic():
        locked = Event.objects.select_for_update().get(pk=event.pk)
        if locked.processed_at is not None:
            return []
        started = []
        parent_id = _parent_run(locked)
        for agent in agents_subscribed(agency_id=locked.agency_id, event_type=locked.event_type):
            trigger_data = {"event_type": locked.event_type, "payload": locked.payload}
            skip = _event_skip(agent, locked)
            if skip is not None:
                log = trigger_log(
                    agent,
                    trigger_type=TriggerType.EVENT,
                    event_type=locked.event_type,
                    trigger_event=locked,
                    payload=trigger_data,
                )
                log_skip(log, *skip)
                continue
            execution = execution_create(
                agent=agent,
                trigger_type=TriggerType.EVENT,
                trigger_data=trigger_data,
                trigger_event=locked,
                parent_id=parent_id,
            )
            if execution is not None:
                started.append(execution)
        locked.processed_at = timezone.now()
        locked.save(update_fields=["processed_at", "updated_at"])
        return started
