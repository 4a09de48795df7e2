"""Row-level security on every flow table (core/rls.py)."""

from django.db import migrations

from core.rls import enable_rls


class Migration(migrations.Migration):
    dependencies = [("flow", "0001_initial")]

    operations = [
        enable_rls("flow_expectedworkflow"),
        enable_rls("flow_completenessanalysis"),
        enable_rls("flow_loopdetection"),
        enable_rls("flow_stuckrun"),
    ]
