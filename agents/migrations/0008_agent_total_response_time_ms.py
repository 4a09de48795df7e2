"""The sum of an agent's response times, from which ``avg_response_time_ms`` is computed exactly.

The average used to be updated in place, ``(avg * total_runs + duration) / (total_runs + 1)`` in
32-bit integers: it overflowed once avg x runs passed 2^31 (every later finish of the agent's runs
failed) and truncated at each run, so it drifted far below the true mean. Existing agents start
their sum from what their average says (``avg * total_runs``), the best estimate there is.
"""

from django.db import migrations, models

from core.tenancy import platform_context

BACKFILL = (
    "UPDATE agents_agent"
    " SET total_response_time_ms = coalesce(avg_response_time_ms, 0)::bigint * total_runs"
)


def backfill(apps, schema_editor):
    alias = schema_editor.connection.alias
    with platform_context(using=alias), schema_editor.connection.cursor() as cursor:
        cursor.execute(BACKFILL)


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0007_same_agency_references"),
    ]

    operations = [
        migrations.AddField(
            model_name="agent",
            name="total_response_time_ms",
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
