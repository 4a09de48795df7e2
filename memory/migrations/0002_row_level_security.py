"""Row-level security on every memory table (core/rls.py)."""

from django.db import migrations

from core.rls import enable_rls


class Migration(migrations.Migration):
    dependencies = [("memory", "0001_initial")]

    operations = [
        enable_rls("memory_memory"),
        enable_rls("memory_episode"),
        enable_rls("memory_conversation"),
    ]
