"""Validate the trigger log's skip-reason CHECK that migration 0012 added NOT VALID: a scan of
the table under a lock that lets trigger logs be written meanwhile (its own transaction)."""

from django.db import migrations


class Migration(migrations.Migration):
    atomic = False  # VALIDATE after 0012's transaction, whose locks it must not hold

    dependencies = [("agents", "0013_execution_budget_reservation")]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE agents_triggerlog VALIDATE CONSTRAINT agents_triggerlog_skip_reason_valid",
            migrations.RunSQL.noop,
        ),
    ]
