"""Memory that can be searched (issue 17): embeddings at the local model's dimension, full-text,
the indexes the hybrid search and the run-start recall read, episode embeddings, and the record
of what consolidation changes (MemoryChange, under row-level security).

Embeddings of 1536 dimensions cannot be turned into 384: the column is changed with ``USING NULL``
and ``embedding_model`` cleared, so ``memory.embed_pending`` / ``reembed_memories`` embed those
memories again with the agency's model (nothing wrote embeddings before this migration).
"""

import uuid

import django.contrib.postgres.fields
import django.contrib.postgres.indexes
import django.contrib.postgres.search
import django.db.models.deletion
import pgvector.django.indexes
import pgvector.django.vector
from django.db import migrations, models

from core.rls import enable_rls

DIMENSIONS = 384  # memory.embeddings.DIMENSIONS when this migration was written


def embedding_hnsw(name: str) -> pgvector.django.indexes.HnswIndex:
    return pgvector.django.indexes.HnswIndex(
        ef_construction=64,
        fields=["embedding"],
        m=16,
        name=name,
        opclasses=["vector_cosine_ops"],
    )


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0001_initial"),
        ("core", "0003_event"),
        ("memory", "0002_row_level_security"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="memory", name="memory_memory_agent_idx"),
        migrations.RemoveIndex(model_name="memory", name="memory_memory_embedding_hnsw"),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="memory",
                    name="embedding",
                    field=pgvector.django.vector.VectorField(
                        blank=True, dimensions=DIMENSIONS, null=True
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    # DDL, in the table's rewrite: no row-level security (FORCE applies to the
                    # owner too) and no trigger events, which would block the DDL that follows.
                    sql=(
                        "ALTER TABLE memory_memory"
                        f" ALTER COLUMN embedding TYPE vector({DIMENSIONS}) USING NULL,"
                        " ALTER COLUMN embedding_model TYPE varchar(100) USING ''"
                    ),
                    reverse_sql=(
                        "ALTER TABLE memory_memory"
                        " ALTER COLUMN embedding TYPE vector(1536) USING NULL,"
                        " ALTER COLUMN embedding_model TYPE varchar(100) USING ''"
                    ),
                ),
            ],
        ),
        migrations.AddField(
            model_name="memory",
            name="search_vector",
            field=models.GeneratedField(
                db_persist=True,
                expression=django.contrib.postgres.search.SearchVector("content", config="english"),
                output_field=django.contrib.postgres.search.SearchVectorField(),
            ),
        ),
        migrations.AddIndex(
            model_name="memory",
            index=models.Index(
                models.F("agency"),
                models.F("agent"),
                models.OrderBy(models.F("importance"), descending=True),
                models.OrderBy(models.F("created_at"), descending=True),
                name="memory_memory_agent_imp_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="memory",
            index=models.Index(
                condition=models.Q(("embedding__isnull", True)),
                fields=["agency", "agent"],
                name="memory_memory_pending_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="memory", index=embedding_hnsw("memory_memory_embedding_hnsw")
        ),
        migrations.AddField(
            model_name="episode",
            name="embedding",
            field=pgvector.django.vector.VectorField(blank=True, dimensions=DIMENSIONS, null=True),
        ),
        migrations.AddField(
            model_name="episode",
            name="embedding_model",
            field=models.CharField(blank=True, max_length=100),
        ),
        migrations.AddIndex(
            model_name="episode", index=embedding_hnsw("memory_episode_embedding_hnsw")
        ),
        migrations.CreateModel(
            name="MemoryChange",
            fields=[
                (
                    "id",
                    models.UUIDField(
                        default=uuid.uuid4, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                (
                    "action",
                    models.CharField(
                        choices=[
                            ("merge", "Merged"),
                            ("prune", "Pruned"),
                            ("dedup", "Reinforced"),
                            ("update", "Updated"),
                        ],
                        max_length=10,
                    ),
                ),
                (
                    "memory_ids",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.UUIDField(), blank=True, default=list
                    ),
                ),
                ("reason", models.TextField()),
                ("before", models.JSONField(blank=True, default=list)),
                ("after", models.JSONField(blank=True, null=True)),
                ("actor", models.CharField(max_length=100)),
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
                        related_name="memory_changes",
                        to="agents.agent",
                    ),
                ),
                (
                    "execution",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="agents.execution",
                    ),
                ),
                (
                    "memory",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="changes",
                        to="memory.memory",
                    ),
                ),
            ],
            options={
                "ordering": ["-created_at"],
                "indexes": [
                    models.Index(
                        fields=["agency", "agent", "-created_at"], name="memory_change_agent_idx"
                    ),
                ],
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(("action__in", ["merge", "prune", "dedup", "update"])),
                        name="memory_change_action_valid",
                    )
                ],
            },
        ),
        enable_rls("memory_memorychange"),
    ]
