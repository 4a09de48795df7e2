"""One run per cron tick: at most one invoked trigger log per agent and ``tick_id``.

``agents.run_scheduled`` puts its Celery task id in the trigger data as ``tick_id``; a message
delivered again (acks_late: the worker died after the commit, before the ack) keeps that id, so
its second run is refused here and the task logs a ``duplicate`` skip instead.

Raw SQL because the key is inside the JSON payload and the model's Meta is not changed with it
(the index is invisible to Django's migration state, so makemigrations sees no change). Built
CONCURRENTLY (outside a transaction) so that trigger logs are written meanwhile; the predicate
keeps it small: only scheduled invocations that carry a tick id.
"""

from django.db import migrations

INDEX = "agents_triggerlog_schedule_tick_uniq"


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run in a transaction

    dependencies = [("agents", "0010_agent_temperature_help")]

    operations = [
        migrations.RunSQL(
            f"CREATE UNIQUE INDEX CONCURRENTLY {INDEX}"
            " ON agents_triggerlog (agent_id, (payload ->> 'tick_id'))"
            " WHERE trigger_type = 'schedule' AND outcome = 'invoked'"
            " AND (payload ->> 'tick_id') IS NOT NULL",
            f"DROP INDEX CONCURRENTLY IF EXISTS {INDEX}",
        ),
    ]
