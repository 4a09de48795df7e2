"""Learning (memory/learning/): run quality, learned patterns and their uses, investigations;
under row-level security like every memory table."""

import uuid
from decimal import Decimal

import django.contrib.postgres.fields
import django.db.models.deletion
import pgvector.django.vector
from django.conf import settings
from django.db import migrations, models

from core.rls import enable_rls


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0021_flow_team_learning_settings"),
        ("core", "0011_api_key_expiry_idempotency"),
        ("memory", "0003_memory_search"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="LearnedPattern",
            fields=[
                (
                    "id",
                    models.UUIDField(
                        default=uuid.uuid4, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                ("task_type", models.CharField(max_length=200)),
                ("description", models.TextField()),
                (
                    "tool_sequence",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.CharField(max_length=200), blank=True, default=list
                    ),
                ),
                ("steps", models.JSONField(blank=True, default=list)),
                (
                    "embedding",
                    pgvector.django.vector.VectorField(blank=True, dimensions=384, null=True),
                ),
                ("embedding_model", models.CharField(blank=True, max_length=100)),
                (
                    "confidence",
                    models.DecimalField(decimal_places=2, default=Decimal("0.70"), max_digits=3),
                ),
                ("success_count", models.PositiveIntegerField(default=0)),
                ("failure_count", models.PositiveIntegerField(default=0)),
                (
                    "source_executions",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.UUIDField(), blank=True, default=list
                    ),
                ),
                ("last_used_at", models.DateTimeField(blank=True, null=True)),
                ("is_active", models.BooleanField(default=True)),
                (
                    "agency",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="core.agency",
                    ),
                ),
                (
                    "agent",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="learned_patterns",
                        to="agents.agent",
                    ),
                ),
            ],
            options={
                "ordering": ["-confidence", "-updated_at"],
            },
        ),
        migrations.CreateModel(
            name="PatternUse",
            fields=[
                (
                    "id",
                    models.UUIDField(
                        default=uuid.uuid4, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                ("similarity", models.FloatField(default=0)),
                (
                    "outcome",
                    models.CharField(
                        blank=True,
                        choices=[
                            ("", "Run not scored yet"),
                            ("success", "Run went well"),
                            ("failure", "Run went badly"),
                        ],
                        max_length=10,
                    ),
                ),
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
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="agents.execution",
                    ),
                ),
                (
                    "pattern",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="uses",
                        to="memory.learnedpattern",
                    ),
                ),
            ],
        ),
        migrations.CreateModel(
            name="RunQuality",
            fields=[
                (
                    "id",
                    models.UUIDField(
                        default=uuid.uuid4, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                ("score", models.FloatField()),
                ("signals", models.JSONField(blank=True, default=dict)),
                ("judge_score", models.FloatField(blank=True, null=True)),
                ("judge_verdict", models.CharField(blank=True, max_length=20)),
                ("judge_reason", models.TextField(blank=True)),
                ("threshold", models.FloatField()),
                (
                    "human_mark",
                    models.CharField(
                        blank=True,
                        choices=[("", "Not marked"), ("good", "Good"), ("bad", "Bad")],
                        max_length=4,
                    ),
                ),
                ("human_note", models.TextField(blank=True)),
                ("marked_at", models.DateTimeField(blank=True, null=True)),
                ("scored_at", models.DateTimeField()),
                (
                    "agency",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="core.agency",
                    ),
                ),
                (
                    "agent",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="run_qualities",
                        to="agents.agent",
                    ),
                ),
                (
                    "execution",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="quality",
                        to="agents.execution",
                    ),
                ),
                (
                    "marked_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "pattern",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="taught_by",
                        to="memory.learnedpattern",
                    ),
                ),
            ],
            options={
                "verbose_name": "run quality",
                "verbose_name_plural": "run qualities",
                "ordering": ["-scored_at"],
            },
        ),
        migrations.CreateModel(
            name="Investigation",
            fields=[
                (
                    "id",
                    models.UUIDField(
                        default=uuid.uuid4, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                ("tool_name", models.CharField(max_length=200)),
                ("tool_call_id", models.CharField(blank=True, max_length=200)),
                ("trigger", models.CharField(max_length=20)),
                ("tool_result", models.JSONField(blank=True, default=dict)),
                ("started_at_step", models.PositiveIntegerField()),
                ("steps_granted", models.PositiveSmallIntegerField()),
                ("steps_used", models.PositiveSmallIntegerField(default=0)),
                ("findings", models.TextField(blank=True)),
                (
                    "outcome",
                    models.CharField(
                        blank=True,
                        choices=[
                            ("", "Under way"),
                            ("resolved", "Run completed after investigating"),
                            ("unresolved", "Run did not complete"),
                        ],
                        max_length=12,
                    ),
                ),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                (
                    "agency",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="core.agency",
                    ),
                ),
                (
                    "agent",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="investigations",
                        to="agents.agent",
                    ),
                ),
                (
                    "execution",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="investigations",
                        to="agents.execution",
                    ),
                ),
            ],
            options={
                "ordering": ["-created_at"],
                "indexes": [
                    models.Index(
                        fields=["agency", "agent", "-created_at"], name="memory_investig_agent_idx"
                    )
                ],
            },
        ),
        migrations.AddIndex(
            model_name="learnedpattern",
            index=models.Index(
                fields=["agency", "agent", "task_type"], name="memory_pattern_agent_type_idx"
            ),
        ),
        migrations.AddConstraint(
            model_name="learnedpattern",
            constraint=models.CheckConstraint(
                condition=models.Q(("confidence__gte", 0), ("confidence__lte", 1)),
                name="memory_pattern_confidence_range",
            ),
        ),
        migrations.AddConstraint(
            model_name="patternuse",
            constraint=models.UniqueConstraint(
                fields=("execution", "pattern"), name="memory_patternuse_unique"
            ),
        ),
        migrations.AddIndex(
            model_name="runquality",
            index=models.Index(
                fields=["agency", "agent", "-scored_at"], name="memory_quality_agent_idx"
            ),
        ),
        migrations.AddConstraint(
            model_name="runquality",
            constraint=models.CheckConstraint(
                condition=models.Q(("score__gte", 0), ("score__lte", 1)),
                name="memory_quality_score_range",
            ),
        ),
        migrations.AddConstraint(
            model_name="runquality",
            constraint=models.CheckConstraint(
                condition=models.Q(("human_mark__in", ["", "good", "bad"])),
                name="memory_quality_mark_valid",
            ),
        ),
        enable_rls("memory_runquality"),
        enable_rls("memory_learnedpattern"),
        enable_rls("memory_patternuse"),
        enable_rls("memory_investigation"),
    ]
