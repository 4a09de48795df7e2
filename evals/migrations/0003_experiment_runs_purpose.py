"""The experiments' runs started before runs had a purpose (agents 0029) become "evaluation" runs:
one UPDATE through the results' run ids (primary-key lookups, no scan of the runs)."""

from django.db import migrations

from core.tenancy import platform_context


def mark(apps, schema_editor):
    Execution = apps.get_model("agents", "Execution")
    ExperimentResult = apps.get_model("evals", "ExperimentResult")
    alias = schema_editor.connection.alias
    # Migrations run as the owner role, which FORCE row-level security also restricts.
    with platform_context(using=alias):
        runs = ExperimentResult.objects.using(alias).filter(execution_id__isnull=False)
        Execution.objects.using(alias).filter(pk__in=runs.values("execution_id")).update(
            purpose="evaluation"
        )


class Migration(migrations.Migration):
    dependencies = [
        ("evals", "0002_row_level_security"),
        ("agents", "0029_execution_purpose"),
    ]

    operations = [migrations.RunPython(mark, migrations.RunPython.noop)]
