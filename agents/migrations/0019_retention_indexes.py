"""An agency's runs and trigger logs by date (its lists; the retention purge's scan of the
oldest), replacing the date-only indexes, which row-level security's agency filter could not
use first. Built and dropped concurrently: runs keep being written meanwhile."""

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("agents", "0018_agent_versions_backfill"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="execution",
            index=models.Index(fields=["agency", "-created_at"], name="agents_execution_agency_idx"),
        ),
        AddIndexConcurrently(
            model_name="triggerlog",
            index=models.Index(
                fields=["agency", "-triggered_at"], name="agents_triggerlog_agency_idx"
            ),
        ),
        RemoveIndexConcurrently(model_name="execution", name="agents_execution_created_idx"),
        RemoveIndexConcurrently(model_name="triggerlog", name="agents_triggerlog_date_idx"),
    ]
