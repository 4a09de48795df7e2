"""Every step updates its execution's row (counters, lease): PostgreSQL writes the whole new row
version, so a config snapshot stored inline (1–10 KB: prompt, tool schemas) was copied into the
WAL at every step. Stored out of line, an unchanged value is a pointer the update reuses."""

from django.db import migrations

# Columns written when the run is created or first claimed and read on a claim, never per step.
BIG_COLUMNS = ("config_snapshot", "trigger_data", "input")


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0005_execution_hot_updates"),
    ]

    operations = [
        migrations.RunSQL(
            # EXTERNAL: out of line and uncompressed (compressed values small enough stay
            # inline, and are copied again); toast_tuple_target: move them out once the row is
            # over 128 bytes instead of the default ~2 KB.
            [
                "ALTER TABLE agents_execution SET (toast_tuple_target = 128)",
                *(
                    f"ALTER TABLE agents_execution ALTER COLUMN {column} SET STORAGE EXTERNAL"
                    for column in BIG_COLUMNS
                ),
            ],
            [
                "ALTER TABLE agents_execution RESET (toast_tuple_target)",
                *(
                    f"ALTER TABLE agents_execution ALTER COLUMN {column} SET STORAGE EXTENDED"
                    for column in BIG_COLUMNS
                ),
            ],
        ),
    ]
