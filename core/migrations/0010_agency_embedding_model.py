"""Which model embeds an agency's memories (memory/embeddings/): the local one by default."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0009_retention_indexes"),
    ]

    operations = [
        migrations.AddField(
            model_name="agency",
            name="embedding_provider",
            field=models.CharField(
                choices=[
                    ("local", "Local model (offline)"),
                    ("openai", "OpenAI"),
                    ("openai_compatible", "OpenAI-compatible server"),
                ],
                default="local",
                help_text="Who embeds memories for semantic search. OpenAI kinds use the agency's "
                "LLM provider of that kind (key, base URL). After a change, existing memories are "
                "found by their words only until `manage.py reembed_memories` has embedded them "
                "again.",
                max_length=32,
            ),
        ),
        migrations.AddField(
            model_name="agency",
            name="embedding_model",
            field=models.CharField(
                blank=True,
                help_text="Empty: the provider's default (local: all-MiniLM-L6-v2; OpenAI: "
                "text-embedding-3-small). A server's model must return vectors of the platform's "
                "size (AGENTDESK_EMBEDDING_DIMENSIONS).",
                max_length=100,
            ),
        ),
        migrations.AddConstraint(
            model_name="agency",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("embedding_provider__in", ["local", "openai", "openai_compatible"])
                ),
                name="core_agency_embedding_provider_valid",
            ),
        ),
    ]
