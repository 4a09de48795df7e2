"""Cron triggers become django-celery-beat entries that follow the agent."""

from __future__ import annotations

import json

import pytest
from django_celery_beat.models import PeriodicTask

from agents.schedules import InvalidCron, agent_schedule_sync, parse_cron, periodic_task_name
from core import tenancy
from tests.agents.factories import AgentFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("expression", ["", "* * *", "61 * * * *", "* 25 * * *", "x y z w v"])
def test_invalid_cron_expressions_are_refused_with_a_reason(expression: str) -> None:
    with pytest.raises(InvalidCron):
        parse_cron(expression)


def test_schedule_entry_follows_the_agent() -> None:
    agent = AgentFactory.create(trigger_schedule="*/15 9-17 * * 1-5", is_active=True)
    with tenancy.agency_context(agent.agency_id):
        task = agent_schedule_sync(agent)
    assert task is not None
    assert task.task == "agents.run_scheduled"
    assert task.crontab is not None
    assert (task.crontab.minute, task.crontab.hour, task.crontab.day_of_week) == (
        "*/15",
        "9-17",
        "1-5",
    )
    assert json.loads(task.kwargs) == {"agency_id": str(agent.agency_id)}
    agent.is_active = False
    with tenancy.agency_context(agent.agency_id):
        assert agent_schedule_sync(agent) is None
    assert not PeriodicTask.objects.filter(name=periodic_task_name(agent)).exists()


def test_beat_entry_task_starts_a_scheduled_run_in_the_agents_agency() -> None:
    from agents.models import Execution
    from agents.tasks import run_scheduled

    agent = AgentFactory.create(trigger_schedule="0 9 * * *", is_active=True)
    other = AgentFactory.create(is_active=True)
    execution_id = run_scheduled.apply(
        args=[str(agent.id)], kwargs={"agency_id": str(agent.agency_id)}
    ).get()
    with tenancy.agency_context(agent.agency_id):
        execution = Execution.objects.get(pk=execution_id)
    assert execution.trigger_type == "schedule"
    # Another agency's agent id is simply not found in this agency's context.
    missing = run_scheduled.apply(args=[str(other.id)], kwargs={"agency_id": str(agent.agency_id)})
    assert missing.get() is None


def test_the_entry_of_an_agent_deleted_with_its_agency_goes_at_its_next_tick() -> None:
    """Deleting an agency (or a site) deletes its agents by cascade, not through agent_delete:
    their beat entries stay behind, and beat would send their ticks forever."""
    from agents.tasks import run_scheduled

    agent = AgentFactory.create(trigger_schedule="0 9 * * *", is_active=True)
    other = AgentFactory.create(trigger_schedule="0 9 * * *", is_active=True)
    with tenancy.agency_context(agent.agency_id):
        agent_schedule_sync(agent)
    with tenancy.agency_context(other.agency_id):
        agent_schedule_sync(other)
    agency_id, name = agent.agency_id, periodic_task_name(agent)
    with tenancy.platform_context():
        agent.agency.delete()
    assert PeriodicTask.objects.filter(name=name).exists()

    tick = run_scheduled.apply(args=[str(agent.id)], kwargs={"agency_id": str(agency_id)})
    assert tick.get() is None
    assert not PeriodicTask.objects.filter(name=name).exists()
    # An agent that exists keeps its entry, whatever agency a message names.
    run_scheduled.apply(args=[str(other.id)], kwargs={"agency_id": str(agency_id)}).get()
    assert PeriodicTask.objects.filter(name=periodic_task_name(other)).exists()


def test_every_fixed_beat_entry_names_a_registered_task() -> None:
    from django.conf import settings

    from config.celery_app import app

    app.loader.import_default_modules()  # what a worker or beat does at start
    names = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert {"agents.reap_expired_leases", "tools.deliver_stranded_emails"} <= names
    assert names <= set(app.tasks)
