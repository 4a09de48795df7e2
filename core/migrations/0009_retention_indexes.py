"""An agency's events by date, of any type (its list; the retention purge's scan of the
oldest). Built concurrently: events keep being written meanwhile."""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("core", "0008_agency_retention"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="event",
            index=models.Index(fields=["agency", "-created_at"], name="core_event_agency_date_idx"),
        ),
    ]
