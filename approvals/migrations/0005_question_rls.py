"""Row-level security on the questions table (core/rls.py)."""

from django.db import migrations

from core.rls import enable_rls


class Migration(migrations.Migration):
    dependencies = [("approvals", "0004_question")]

    operations = [enable_rls("approvals_question")]
