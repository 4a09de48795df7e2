"""Existing state transitions get their ``exited_at`` and ``duration_ms`` (seed 003).

The runtime now closes a run's current state when it records the next one; rows written before
that were all left open. Each is closed at the next transition's ``entered_at`` — what the runtime
writes now — and a run's latest state stays open (where it is now, or where it ended).
"""

from django.db import migrations

from core.tenancy import platform_context

CLOSE_PAST_STATES = """
UPDATE agents_statetransition AS state
SET exited_at = following.entered_at,
    duration_ms = least(
        greatest(0, round(extract(epoch FROM following.entered_at - state.entered_at) * 1000)),
        2147483647
    )
FROM (
    SELECT id, lead(entered_at) OVER (PARTITION BY execution_id ORDER BY sequence) AS entered_at
    FROM agents_statetransition
) AS following
WHERE following.id = state.id
  AND following.entered_at IS NOT NULL
  AND state.exited_at IS NULL
"""


def close_past_states(apps, schema_editor):  # type: ignore[no-untyped-def]
    alias = schema_editor.connection.alias
    with platform_context(using=alias), schema_editor.connection.cursor() as cursor:
        cursor.execute(CLOSE_PAST_STATES)


class Migration(migrations.Migration):
    dependencies = [("agents", "0008_agent_total_response_time_ms")]

    operations = [migrations.RunPython(close_past_states, migrations.RunPython.noop)]
