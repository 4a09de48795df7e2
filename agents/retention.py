"""What the agents app keeps, and for how long (core/retention.py does the deleting), and the
platform's events (core.Event), whose retention depends on the runs they started.

A finished run is deleted with its steps, state transitions, decision points, the messages it
sent, its tool calls, approvals and questions (they cascade). One in progress or waiting never
is, whatever its age, and neither is a finished one whose child run still is (its ``parent``
would be cleared). Usage was added to the day's totals (usage.UsageDaily) by each model call as
it happened; those totals are kept.
"""

from __future__ import annotations

import datetime

from celery import shared_task
from django.db.models import Exists, OuterRef, QuerySet

from agents.models import TERMINAL_STATUSES, Execution, TriggerLog
from core.models import Event
from core.retention import Policy, purge_all_agencies


def _executions_past(before: datetime.datetime) -> QuerySet[Execution]:
    child_in_flight = Execution.objects.filter(parent=OuterRef("pk")).exclude(
        status__in=TERMINAL_STATUSES
    )
    return Execution.objects.filter(created_at__lt=before, status__in=TERMINAL_STATUSES).exclude(
        Exists(child_in_flight)
    )


def _trigger_logs_past(before: datetime.datetime) -> QuerySet[TriggerLog]:
    return TriggerLog.objects.filter(triggered_at__lt=before)


def _events_past(before: datetime.datetime) -> QuerySet[Event]:
    # Processed ones only (an event not yet dispatched still has agents to start), and not one
    # that started a run still in progress or waiting: deleting it would clear that run's
    # trigger_event, and such runs are never touched.
    in_flight = Execution.objects.filter(trigger_event=OuterRef("pk")).exclude(
        status__in=TERMINAL_STATUSES
    )
    return Event.objects.filter(created_at__lt=before, processed_at__isnull=False).exclude(
        Exists(in_flight)
    )


EXECUTIONS = Policy("executions", "execution_retention_days", _executions_past)
TRIGGER_LOGS = Policy("trigger_logs", "trigger_log_retention_days", _trigger_logs_past)
# The logs first: they point at the runs (SET NULL), which would otherwise be updated in vain.
POLICIES = [TRIGGER_LOGS, EXECUTIONS]
EVENTS = Policy("events", "event_retention_days", _events_past)


@shared_task(name="agents.purge_past_retention", ignore_result=True)
def purge_past_retention() -> int:
    """Beat: each agency's finished runs and trigger logs past its retention."""
    return purge_all_agencies(POLICIES)


@shared_task(name="agents.purge_events_past_retention", ignore_result=True)
def purge_events_past_retention() -> int:
    """Beat: processed events older than each agency's ``event_retention_days``."""
    return purge_all_agencies([EVENTS])
