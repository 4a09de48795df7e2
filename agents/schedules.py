"""Cron triggers: an agent's ``trigger_schedule`` becomes a django-celery-beat entry that starts
``agents.run_scheduled`` for it; the entry follows the agent (edited, deactivated, deleted)."""

from __future__ import annotations

import json

from celery.schedules import ParseException, crontab
from django.conf import settings
from django_celery_beat.models import CrontabSchedule, PeriodicTask

from agents.models import Agent
from core import tenancy

FIELDS = ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")


class InvalidCron(ValueError):
    pass


def parse_cron(expression: str) -> dict[str, str]:
    """The five fields of a standard cron expression; :class:`InvalidCron` with a reason."""
    parts = expression.split()
    if len(parts) != len(FIELDS):
        raise InvalidCron(
            f"A cron expression has 5 fields (minute hour day-of-month month day-of-week); "
            f"{expression!r} has {len(parts)}."
        )
    fields = dict(zip(FIELDS, parts, strict=True))
    try:
        crontab(**fields)  # Celery's own parser: what beat will run is what we accept
    # ParseException ("1,,2": "empty part") is not a ValueError.
    except (ValueError, KeyError, IndexError, ParseException) as exc:
        raise InvalidCron(f"Invalid cron expression {expression!r}: {exc}") from exc
    return fields


def periodic_task_name(agent: Agent) -> str:
    return f"agent-schedule:{agent.id}"  # (remove_orphaned_schedule spells it from an id)


def agent_schedule_sync(agent: Agent) -> PeriodicTask | None:
    """Create, update or remove the beat entry of ``agent`` (call after every save/delete)."""
    name = periodic_task_name(agent)
    if not agent.trigger_schedule or not agent.is_active or agent.pk is None:
        PeriodicTask.objects.filter(name=name).delete()
        return None
    fields = parse_cron(agent.trigger_schedule)
    schedule, _ = CrontabSchedule.objects.get_or_create(timezone=settings.TIME_ZONE, **fields)
    # django-celery-beat 2.1's manager overrides update_or_create (it returns the object only),
    # so the row is fetched and saved explicitly; save() also tells beat the schedule changed.
    task = PeriodicTask.objects.filter(name=name).first() or PeriodicTask(name=name)
    task.task = "agents.run_scheduled"
    task.crontab = schedule
    task.interval = None
    task.args = json.dumps([str(agent.id)])
    task.kwargs = json.dumps({"agency_id": str(agent.agency_id)})
    task.enabled = True
    task.description = f"Cron trigger of agent {agent.name}"
    task.save()
    return task


def agent_schedule_remove(agent: Agent) -> None:
    PeriodicTask.objects.filter(name=periodic_task_name(agent)).delete()


def remove_orphaned_schedule(agent_id: str) -> bool:
    """Remove the beat entry of an agent that no longer exists: one deleted with its agency or
    site (a cascade that does not go through agent_delete). True if there was one. An agent
    that exists, in any agency, keeps its entry."""
    with tenancy.platform_context():
        if Agent.objects.filter(pk=agent_id).exists():
            return False
    deleted, _ = PeriodicTask.objects.filter(name=f"agent-schedule:{agent_id}").delete()
    return bool(deleted)
