"""Row-level security on the evaluation tables (core/rls.py)."""

from django.db import migrations

from core.rls import enable_rls


class Migration(migrations.Migration):
    dependencies = [("evals", "0001_initial")]

    operations = [
        enable_rls("evals_dataset"),
        enable_rls("evals_datasetversion"),
        enable_rls("evals_testcase"),
        enable_rls("evals_experiment"),
        enable_rls("evals_experimentresult"),
    ]
