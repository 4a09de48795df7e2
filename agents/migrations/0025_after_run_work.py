"""The after-run work a run is owed, recorded with its end (agents/after_run.py), under
row-level security like every agency-owned table (core/rls.py)."""

import uuid

import django.db.models.deletion
from django.db import migrations, models

from core.rls import enable_rls


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0024_agent_loop_same_state"),
        ("core", "0011_api_key_expiry_idempotency"),
    ]

    operations = [
        migrations.CreateModel(
            name="AfterRunWork",
            fields=[
                (
                    "id",
                    models.UUIDField(
                        default=uuid.uuid4, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                ("task", models.CharField(max_length=100)),
                ("due_at", models.DateTimeField()),
                ("sends", models.PositiveSmallIntegerField(default=1)),
                (
                    "agency",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="core.agency",
                    ),
                ),
                (
                    "execution",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="agents.execution",
                    ),
                ),
            ],
            options={
                "verbose_name": "after-run work",
                "verbose_name_plural": "after-run work",
                "indexes": [models.Index(fields=["due_at"], name="agents_afterrun_due_idx")],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("execution", "task"), name="agents_afterrun_unique"
                    )
                ],
            },
        ),
        enable_rls("agents_afterrunwork"),
    ]
